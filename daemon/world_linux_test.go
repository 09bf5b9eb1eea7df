//go:build linux

package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/daemon/exporters"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/session"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon creates cgroups, runs sessions as other users and reads peer credentials of other users")
	}
}

// cgroup2Available probes independently of the cgroup package.
func cgroup2Available(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || !bytes.Contains(b, []byte(" - cgroup2 ")) {
		t.Skip("no cgroup2 mount: sessions cannot be created here")
	}
}

// landlockUsable probes Landlock with the raw syscall.
func landlockUsable() (int, bool) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	return int(v), errno == 0 && v >= 3
}

type syncBuffer = testutil.SyncBuffer

// world is one test's daemon and scratch directories. It lives below
// /var/tmp because /tmp is a default writable root of every session.
type world struct {
	base, socket, ws, outside, audit string
	opts                             Options
	srv                              *Server
	log                              *syncBuffer
	stop                             func()
	// dns are the answers of the fake upstream of a daemon started by
	// startDaemonInNetns (none: the daemon uses /etc/resolv.conf).
	dns map[string]string
}

const nobody = 65534

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func newWorld(t *testing.T) *world {
	t.Helper()
	requireRoot(t)
	cgroup2Available(t)
	base, err := os.MkdirTemp("/var/tmp", "oxs-dtest-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	w := &world{base: base, socket: filepath.Join(base, "run", "api.sock"), ws: filepath.Join(base, "ws"),
		outside: filepath.Join(base, "outside"), audit: filepath.Join(base, "log", "audit.jsonl"), log: &syncBuffer{}}
	for _, d := range []string{w.ws, w.outside, filepath.Join(base, "managed"), filepath.Join(base, "log")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chown(w.ws, nobody, nobody)
	// World-writable: only the sandbox, not file permissions, keeps a
	// session out of it.
	os.Chmod(w.outside, 0o777)
	parent := "oxs-dtest-" + randHex(4)
	w.opts = Options{
		Socket: w.socket, ManagedDir: filepath.Join(base, "managed"), AuditPath: w.audit,
		ApprovalTimeout: 20 * time.Second,
		Cgroup:          cgroup.Config{Parent: parent},
		Registry:        session.Registry{Dir: filepath.Join(base, "registry")},
		StateDir:        filepath.Join(base, "state"),
		PinDir:          filepath.Join(base, "bpf"),
		SelfExe:         helper, Log: w.log,
		Exporters:  exporters.Start, // as the daemon program's
		adoptGrace: -1,
	}
	t.Cleanup(func() {
		if w.stop != nil {
			w.stop()
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", w.log.String())
		}
		if mnt, err := cgroup.Cgroup2Mount(); err == nil {
			ids, _ := cgroup.ListSessions(w.opts.Cgroup)
			for _, id := range ids {
				session.Stop(context.Background(), w.opts.Cgroup, w.opts.Registry, id)
			}
			// A daemon killed by the test (kill -9) leaves its waiting
			// slot for the next daemon's adoption; none comes here, and
			// its launcher may still be dying (RemoveSlots leaves a slot
			// with a process alone): killed and removed here.
			slots, _ := cgroup.ListSlots(w.opts.Cgroup)
			for _, id := range slots {
				if g, err := cgroup.OpenSession(w.opts.Cgroup, id); err == nil {
					g.Kill(context.Background())
					g.Remove(context.Background())
				}
			}
			os.Remove(filepath.Join(mnt, parent))
		}
		os.RemoveAll(base)
	})
	return w
}

func (w *world) start(t *testing.T) {
	t.Helper()
	srv, err := New(w.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	w.srv = srv
	w.stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("daemon did not stop within 10s")
		}
		w.stop = nil
	}
	// Starting builds the BPF layers (verifier time grows with machine
	// load) and adopts sessions: a liveness bound, not a speed assertion.
	deadline := time.Now().Add(60 * time.Second)
	for !Available(w.socket) {
		select {
		case err := <-done:
			t.Fatalf("daemon exited: %v\n%s", err, w.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not answering on %s\n%s", w.socket, w.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog waits for a line of a daemon's log: the socket answers before
// the daemon has adopted what an earlier one left, so its adoption lines
// may come after the socket is up.
func waitLog(t *testing.T, log *syncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(log.String(), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon log lacks %q:\n%s", want, log.String())
		}
	}
}

type helperResult struct {
	code           int
	stdout, stderr string
}

// runHelper runs the client helper as uid (gid = uid) in dir.
func (w *world) runHelper(t *testing.T, uid int, dir string, env []string, mode string, args ...string) helperResult {
	t.Helper()
	cmd := exec.Command(helper, clientArgs(mode, args...)...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", helperSocketEnv + "=" + w.socket}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	err := cmd.Run()
	res := helperResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("helper %s: %v", mode, err)
	}
	return res
}

// attachNet has the user nobody attach pid through the daemon with
// network policy net (allow: one allow entry, "-" for none) and returns
// the daemon's answer; anything but success fails the test.
func (w *world) attachNet(t *testing.T, pid int, net, allow string) AttachResult {
	t.Helper()
	res := w.runHelper(t, nobody, w.ws, nil, "attachnet", itoa(pid), net, allow)
	if res.code != 0 {
		t.Fatalf("attach: exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	var ar AttachResult
	if err := json.Unmarshal([]byte(res.stdout), &ar); err != nil || ar.Session.ID == "" {
		t.Fatalf("attach answer %q: %v", res.stdout, err)
	}
	return ar
}

// rawRequest sends bytes on a fresh connection and returns the status and
// body of the answer.
func rawRequest(t *testing.T, socket, method, path string, body []byte) (int, Error) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	req, _ := http.NewRequest(method, "http://x"+path, bytes.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e Error
	if resp.StatusCode/100 != 2 {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s %s: status %d with a non-JSON body %q", method, path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, e
}

func execCommand(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	return cmd
}

func credentialFor(uid int) *syscall.Credential {
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
}

func sessionOfPID(w *world, pid int) (string, bool, error) {
	return cgroup.SessionOf(w.opts.Cgroup, pid)
}

func cgroupSessions(w *world) ([]string, error) {
	return cgroup.ListSessions(w.opts.Cgroup)
}
