//go:build linux

package fsvmtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/landlock"
)

// The helper ops of this file (testutil.RunOp): "unixop" reaches abstract
// AF_UNIX sockets, "linkop" makes symlinks and renames. Each prints OK or
// the errno name, like fsop.
var (
	unixopVerb = `"$SELF" ` + testutil.OpArgs("unixop")[0]
	linkopVerb = `"$SELF" ` + testutil.OpArgs("linkop")[0]
)

const sessionMessage = "from the session"

// unixop: "connect NAME" connects a stream socket and writes a message,
// "sendto NAME" sends a datagram, "pair" talks over a stream and a
// datagram socketpair; "serve STREAM DGRAM RESULT" binds a stream listener
// and a datagram socket, prints "ready", reads its stdin to the end (the
// shell closes it when the clients are done: a fifo of its own, as a
// pipeline's left side would not hold it) and writes what reached each
// socket to RESULT.
// Abstract names start with "@".
func unixop(args []string) int {
	var err error
	switch {
	case len(args) == 2 && args[0] == "connect":
		var fd int
		if fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
			if err = unix.Connect(fd, &unix.SockaddrUnix{Name: args[1]}); err == nil {
				_, err = unix.Write(fd, []byte(sessionMessage))
			}
			unix.Close(fd)
		}
	case len(args) == 2 && args[0] == "sendto":
		var fd int
		if fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err == nil {
			err = unix.Sendto(fd, []byte(sessionMessage), 0, &unix.SockaddrUnix{Name: args[1]})
			unix.Close(fd)
		}
	case len(args) == 1 && args[0] == "pair":
		err = socketpairs()
	case len(args) == 4 && args[0] == "serve":
		return serve(args[1], args[2], args[3])
	default:
		fmt.Fprintln(os.Stderr, "usage: unixop connect|sendto NAME | unixop pair | unixop serve STREAM DGRAM RESULT")
		return 2
	}
	return printOutcome(err)
}

// linkop: "symlink TARGET NAME", "rename OLD NEW".
func linkop(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: linkop symlink TARGET NAME | linkop rename OLD NEW")
		return 2
	}
	switch args[0] {
	case "symlink":
		return printOutcome(unix.Symlink(args[1], args[2]))
	case "rename":
		return printOutcome(unix.Rename(args[1], args[2]))
	}
	fmt.Fprintf(os.Stderr, "unknown linkop %q\n", args[0])
	return 2
}

func printOutcome(err error) int {
	return testutil.ReportErrnoName(err)
}

// socketpairs sends one message over a stream and a datagram socketpair:
// unnamed sockets, whose datagram sends pass unix_may_send too.
func socketpairs() error {
	for _, typ := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM} {
		fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		_, err = unix.Write(fds[0], []byte(sessionMessage))
		buf := make([]byte, 64)
		n := 0
		if err == nil {
			n, err = unix.Read(fds[1], buf)
		}
		unix.Close(fds[0])
		unix.Close(fds[1])
		if err != nil {
			return err
		}
		if string(buf[:n]) != sessionMessage {
			return fmt.Errorf("socketpair type %d carried %q", typ, buf[:n])
		}
	}
	return nil
}

func serve(streamName, dgramName, result string) int {
	stream, dgram, err := abstractListeners(streamName, dgramName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	fmt.Println("ready")
	var sink bytes.Buffer
	sink.ReadFrom(os.Stdin) // the clients are done when the shell closes it
	got := fmt.Sprintf("stream=%s dgram=%s\n", pending(stream, true), pending(dgram, false))
	if err := os.WriteFile(result, []byte(got), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// abstractListeners binds a listening stream socket and a datagram
// socket, both non-blocking, at two abstract names.
func abstractListeners(streamName, dgramName string) (stream, dgram int, err error) {
	stream, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, err
	}
	if err = unix.Bind(stream, &unix.SockaddrUnix{Name: streamName}); err == nil {
		err = unix.Listen(stream, 8)
	}
	if err != nil {
		unix.Close(stream)
		return -1, -1, fmt.Errorf("stream listener %s: %w", streamName, err)
	}
	dgram, err = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		if err = unix.Bind(dgram, &unix.SockaddrUnix{Name: dgramName}); err != nil {
			unix.Close(dgram)
		}
	}
	if err != nil {
		unix.Close(stream)
		return -1, -1, fmt.Errorf("datagram socket %s: %w", dgramName, err)
	}
	return stream, dgram, nil
}

// pending returns what already reached the non-blocking socket fd (a
// queued connection's message, or a datagram), "none" when nothing did.
// Called once every client has returned from its system call, so nothing
// is still on its way: no waiting, no deadline.
func pending(fd int, listener bool) string {
	if listener {
		conn, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
		if errors.Is(err, unix.EAGAIN) {
			return "none"
		}
		if err != nil {
			return "accept:" + err.Error()
		}
		defer unix.Close(conn)
		fd = conn
	}
	buf := make([]byte, 64)
	n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return "empty"
	case err != nil:
		return "recv:" + err.Error()
	}
	return strings.ReplaceAll(string(buf[:n]), " ", "_")
}

// runWith runs script in a session through `oxsupervise run` with extra
// flags, returning its exit code, stdout and stderr.
func (e *env) runWith(t *testing.T, flags []string, script string) (int, string, string) {
	t.Helper()
	cli := os.Getenv(cliEnv)
	if cli == "" {
		testutil.SkipUnlessVM(t, "%s not set: the vmtest runner provides the oxsupervise binary", cliEnv)
	}
	args := append(append([]string{"run", "--workspace", e.ws, "--audit-log", e.auditLog}, flags...), "--", "sh", "-c", script)
	cmd := exec.Command(cli, args...)
	cmd.Dir = e.ws
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + e.home, "SELF=" + e.self, "OUT=" + e.outside}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("oxsupervise run: %v", err)
	}
	return 0, stdout.String(), stderr.String()
}

// TestRunAbstractUnixPeers: inside `oxsupervise run`, a stream connect and
// a datagram send to abstract sockets that a process outside the session
// (this test) listens on are refused with EPERM, nothing reaches them, and
// each refusal is audited with the socket's @name; sockets whose both ends
// are in the session (a listener in the session's shell, socketpairs)
// work. In network mode none (the default) and full alike: abstract
// sockets are local IPC, not network. On the BPF-LSM path nothing warns
// that unix sockets are unblocked any more.
func TestRunAbstractUnixPeers(t *testing.T) {
	requireBPFLSM(t)
	// Landlock is stacked on BPF-LSM exactly when the kernel audits its
	// refusals (planner); stacked at ABI 6+ it scopes abstract sockets
	// itself and, first in the LSM order, refuses before bpf does. The ABI
	// comes from an independent probe.
	abi, llErr := landlock.ABI()
	landlockFirst := llErr == nil && abi >= landlock.AuditABI
	t.Logf("landlock ABI %d (%v): refusals expected from %s", abi, llErr, map[bool]string{true: "landlock", false: "bpf-lsm"}[landlockFirst])

	for _, net := range []string{"", "full"} {
		name := "net=" + net
		if net == "" {
			name = "net=default"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			// X11's own naming: on a desktop @/tmp/.X11-unix/X0 is the display.
			base := fmt.Sprintf("/tmp/.X11-unix/oxs-%d-%s", os.Getpid(), net)
			outStream, outDgram := "@"+base+"-out-stream", "@"+base+"-out-dgram"
			inStream, inDgram := "@"+base+"-in-stream", "@"+base+"-in-dgram"
			stream, dgram, err := abstractListeners(outStream, outDgram)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(stream)
			defer unix.Close(dgram)

			var flags []string
			if net != "" {
				flags = []string{"--net", net}
			}
			script := fmt.Sprintf(`set -e
%[1]s connect '%[2]s' > r-out-stream
%[1]s sendto '%[3]s' > r-out-dgram
mkfifo ready done
%[1]s serve '%[4]s' '%[5]s' r-served < done > ready &
exec 3> done
read line < ready
%[1]s connect '%[4]s' > r-in-stream
%[1]s sendto '%[5]s' > r-in-dgram
exec 3>&-
wait $!
%[1]s pair > r-pair
`, unixopVerb, outStream, outDgram, inStream, inDgram)
			code, stdout, stderr := e.runWith(t, flags, script)
			if code != 0 {
				log, _ := os.ReadFile(e.auditLog)
				t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s\naudit log:\n%s", code, stdout, stderr, log)
			}
			for file, want := range map[string]string{
				"r-out-stream": "EPERM", "r-out-dgram": "EPERM",
				"r-in-stream": "OK", "r-in-dgram": "OK", "r-pair": "OK",
				"r-served": "stream=from_the_session dgram=from_the_session",
			} {
				if got := read(t, filepath.Join(e.ws, file)); got != want {
					t.Errorf("%s: %q, want %q", file, got, want)
				}
			}
			if got := pending(stream, true); got != "none" {
				t.Errorf("the outside stream listener got a connection: %s", got)
			}
			if got := pending(dgram, false); got != "empty" {
				t.Errorf("the outside datagram socket got a datagram: %s", got)
			}
			if strings.Contains(stderr, "unix sockets") {
				t.Errorf("run on BPF-LSM warns about unix sockets:\n%s", stderr)
			}

			id, _ := sessionOf(t, e.auditLog, 0)
			var denials []audit.Record
			for _, r := range records(t, e.auditLog) {
				if r.Ox.Kind == audit.KindDenial && r.Ox.Session == id {
					denials = append(denials, r)
				}
			}
			if landlockFirst {
				// Landlock's record names no socket (kernelaudit's scope
				// blocker); one per refused call.
				n := 0
				for _, r := range denials {
					if r.Ox.Layer == audit.LayerLandlock && r.Event.Action == "connect" && r.Ox.Errno == int(unix.EPERM) {
						n++
					}
				}
				if n != 2 {
					t.Errorf("%d landlock scope refusals, want 2 (stream, datagram): %+v", n, denials)
				}
				return
			}
			for _, name := range []string{outStream, outDgram} {
				expectPeerDenial(t, denials, name)
			}
			for _, r := range denials {
				if r.File != nil && (r.File.Path == inStream || r.File.Path == inDgram) {
					t.Errorf("a socket inside the session was refused: %+v", r)
				}
			}
		})
	}
}

// expectPeerDenial finds bpf/unix.c's refusal of the abstract socket name
// among a session's denials.
func expectPeerDenial(t *testing.T, denials []audit.Record, name string) {
	t.Helper()
	var seen []string
	for _, r := range denials {
		p := ""
		if r.File != nil {
			p = r.File.Path
		}
		seen = append(seen, fmt.Sprintf("%s %s %s", r.Ox.Layer, r.Event.Action, p))
		if r.Ox.Layer != audit.LayerBPFLSM || r.Event.Action != "unix_connect" || p != name {
			continue
		}
		if r.Ox.Errno != int(unix.EPERM) || r.Error == nil || r.Error.Code != "EPERM" {
			t.Errorf("refusal of %s: errno %d %+v, want EPERM", name, r.Ox.Errno, r.Error)
		}
		if !strings.Contains(r.Ox.Rule, "outside the session") || !strings.Contains(r.Event.Reason, "unix_peer_outside_session") {
			t.Errorf("refusal of %s: rule %q reason %q", name, r.Ox.Rule, r.Event.Reason)
		}
		if r.Process == nil || r.Process.PID == 0 || r.Process.Name == "" || r.User == nil || r.User.ID != "0" {
			t.Errorf("refusal of %s: process %+v user %+v", name, r.Process, r.User)
		}
		return
	}
	t.Errorf("no bpf-lsm unix_connect refusal of %s; denials: %q", name, seen)
}

// TestRunSymlinkAtProtectedName: a session cannot make a symlink at a
// protected name that does not exist yet (one there would send a later
// session's or the user's tools wherever it points), nor at a name that
// is part of a pattern (.git/modules/x: everything the patterns protect
// below it), nor rename a symlink onto one; a symlink elsewhere in the
// workspace still works. Each refusal is EACCES, leaves no link, and is
// audited.
func TestRunSymlinkAtProtectedName(t *testing.T) {
	requireBPFLSM(t)
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Join(e.ws, ".git", "modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`%[1]s symlink /elsewhere .openoxide > r-openoxide
%[1]s symlink /tmp/x .claude > r-claude
%[1]s symlink "$OUT" .git/modules/lib > r-module
%[1]s symlink "$OUT" staging > r-staging
%[1]s rename staging .vscode > r-rename
`, linkopVerb)
	code, stdout, stderr := e.runWith(t, nil, script)
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	id, _ := sessionOf(t, e.auditLog, 0)
	for _, tt := range []struct {
		result, want, absent, action, audited string
	}{
		{"r-openoxide", "EACCES", ".openoxide", "symlink", ".openoxide"},
		{"r-claude", "EACCES", ".claude", "symlink", ".claude"},
		{"r-module", "EACCES", ".git/modules/lib", "symlink", ".git/modules/lib"},
		{"r-staging", "OK", "", "", ""},
		{"r-rename", "EACCES", ".vscode", "rename", ".vscode"},
	} {
		if got := read(t, filepath.Join(e.ws, tt.result)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.result, got, tt.want)
		}
		if tt.absent != "" {
			if _, err := os.Lstat(filepath.Join(e.ws, tt.absent)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s exists after the refusal: %v", tt.absent, err)
			}
		}
		if tt.audited != "" {
			expectDenial(t, e.auditLog, id, tt.action, filepath.Join(e.ws, tt.audited))
		}
	}
	if target, err := os.Readlink(filepath.Join(e.ws, "staging")); err != nil || target != e.outside {
		t.Errorf("staging after the refused rename: %q, %v; want the symlink to %s", target, err, e.outside)
	}
}
