//go:build linux

package daemon

import (
	"bytes"
	"context"
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
	"github.com/openoxide/oxsupervise/internal/procfs"
)

// An unprivileged user runs a confined command through the daemon: output
// and exit status come back, the command runs as the user, writes in the
// workspace succeed and writes outside fail (EROFS from the Landlock path's
// read-only view, built by the daemon for the user's session), and the
// session and that refusal are audited.
func TestRunAsUnprivilegedUser(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	abi, llOK := landlockUsable()
	script := `echo hello; id -u; echo data > ok.txt; echo x > "$OUT/escape.txt"; echo "escape=$?"; exit 7`
	res := w.runHelper(t, nobody, w.ws, []string{"OUT=" + w.outside}, "run", w.ws, "sh", "-c", script)
	if res.code != 7 {
		t.Fatalf("exit %d, want 7 (the command's own)\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, "hello\n65534\n") {
		t.Fatalf("stdout %q: want hello and uid 65534", res.stdout)
	}
	if got := fileOwner(t, filepath.Join(w.ws, "ok.txt")); got != nobody {
		t.Fatalf("ok.txt owned by %d, want %d", got, nobody)
	}
	if !llOK {
		t.Logf("Landlock ABI %d unusable: the write-outside denial is not asserted here", abi)
	} else {
		// EACCES from BPF-LSM, EROFS from the Landlock path's read-only
		// mount view (launcher.MountPlan.ReadOnlyView).
		if strings.Contains(res.stdout, "escape=0") || !(strings.Contains(res.stderr, "Permission denied") || strings.Contains(res.stderr, "Read-only file system")) {
			t.Fatalf("write outside the workspace was not denied with EACCES or EROFS:\nstdout %s\nstderr %s", res.stdout, res.stderr)
		}
		if exists(filepath.Join(w.outside, "escape.txt")) {
			t.Fatal("escape.txt exists outside the workspace")
		}
	}
	var starts, escapes int
	escape := filepath.Join(w.outside, "escape.txt")
	for _, r := range auditRecords(t, w.audit) {
		if oxField(r, "kind") == "session_start" && strings.HasPrefix(oxField(r, "session").(string), "s-") {
			starts++
		}
		// BPF-LSM and the read-only view name the file refused.
		if f, _ := r["file"].(map[string]any); oxField(r, "kind") == "denial" && f["path"] == escape {
			escapes++
		}
	}
	if starts != 1 {
		t.Fatalf("%d session_start records in %s, want 1", starts, w.audit)
	}
	if llOK && escapes != 1 {
		t.Fatalf("%d denial records of %s in %s, want 1", escapes, escape, w.audit)
	}
	// The session is gone once the command exited.
	if ids, _ := cgroupSessions(w); len(ids) != 0 {
		t.Fatalf("session groups left behind: %v", ids)
	}
}

// A user cannot attach root's or another user's processes, cannot see or
// stop another user's session, and can attach, see and stop their own.
func TestAttachAndStopAuthorization(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	const other = 64123 // no account needed: authorization is by uid
	startSleep := func(uid int) *os.Process {
		cmd := execCommand("sleep", "60")
		if uid != 0 {
			cmd.SysProcAttr.Credential = credentialFor(uid)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd.Process
	}
	rootProc := startSleep(0)
	otherProc := startSleep(other)
	ownProc := startSleep(nobody)

	for name, p := range map[string]*os.Process{"root's": rootProc, "another user's": otherProc} {
		res := w.runHelper(t, nobody, w.ws, nil, "attach", itoa(p.Pid))
		if res.code == 0 || !strings.Contains(res.stderr, "ERR forbidden") || !strings.Contains(res.stderr, "only its owner or root may attach it") {
			t.Fatalf("attach of %s process: exit %d, stderr %q; want forbidden", name, res.code, res.stderr)
		}
		if id, in, _ := sessionOfPID(w, p.Pid); in {
			t.Fatalf("%s process was moved into session %s", name, id)
		}
	}

	res := w.runHelper(t, nobody, w.ws, nil, "attach", itoa(ownProc.Pid))
	if res.code != 0 {
		t.Fatalf("attach of own process: exit %d, stderr %q", res.code, res.stderr)
	}
	var ar AttachResult
	if err := json.Unmarshal([]byte(res.stdout), &ar); err != nil {
		t.Fatalf("attach answer %q: %v", res.stdout, err)
	}
	id := ar.Session.ID
	if got, in, _ := sessionOfPID(w, ownProc.Pid); !in || got != id {
		t.Fatalf("own process is in session %q (%v), want %s", got, in, id)
	}

	if res := w.runHelper(t, nobody, w.ws, nil, "sessions"); !strings.Contains(res.stdout, id) {
		t.Fatalf("owner does not see session %s: %s %s", id, res.stdout, res.stderr)
	}
	if res := w.runHelper(t, other, "/", nil, "sessions"); strings.Contains(res.stdout, id) || res.code != 0 {
		t.Fatalf("another user sees session %s (exit %d): %s", id, res.code, res.stdout)
	}
	res = w.runHelper(t, other, "/", nil, "stop", id)
	if res.code == 0 || !strings.Contains(res.stderr, "ERR forbidden") {
		t.Fatalf("another user stopping %s: exit %d %q; want forbidden", id, res.code, res.stderr)
	}
	if !procfs.Alive(ownProc.Pid) {
		t.Fatal("the session's process died after a refused stop")
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "stop", "s-000000000000"); !strings.Contains(res.stderr, "ERR not_found") {
		t.Fatalf("stop of an unknown session: %q, want not_found", res.stderr)
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "stop", id); res.code != 0 {
		t.Fatalf("owner stopping %s: exit %d %q", id, res.code, res.stderr)
	}
	st, err := ownProc.Wait()
	if err != nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("stopped session's process: %v %v, want killed by SIGKILL", st, err)
	}
}

// Bad input gets a clear JSON error, and nothing a client sends stops the
// daemon from serving the next request.
func TestBadInput(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	big := bytes.Repeat([]byte("x"), 2*MaxRequestBytes)
	for _, tc := range []struct {
		name, method, path string
		body               []byte
		status             int
		code, want         string
	}{
		{"malformed JSON", "POST", "/sessions", []byte(`{"argv":["sh"`), 400, "bad_request", "malformed JSON"},
		{"unknown field", "POST", "/sessions", []byte(`{"argv":["sh"],"dir":"/","uid":0}`), 400, "unknown_field", `unknown field "uid"`},
		{"oversized body", "POST", "/sessions", big, 413, "too_large", "larger than"},
		{"no descriptors", "POST", "/sessions", []byte(`{"argv":["true"],"dir":"/"}`), 400, "bad_request", "exactly 3 file descriptors"},
		{"unknown session", "DELETE", "/sessions/s-0123456789ab", nil, 404, "not_found", "no such session"},
		{"invalid session id", "DELETE", "/sessions/cgroup.procs", nil, 400, "bad_request", "reserved"},
		{"signal unknown session", "POST", "/sessions/s-0123456789ab/signal", []byte(`{"signal":2}`), 404, "not_found", "no such session"},
		{"unknown approval", "POST", "/permission/a-0123/reply", []byte(`{"reply":"once"}`), 404, "not_found", "no pending approval"},
		{"bad reply", "POST", "/permission/a-0123/reply", []byte(`{"reply":"maybe"}`), 400, "bad_request", "once, always, reject"},
		{"attach no such pid", "POST", "/sessions/attach", []byte(`{"pid":999999999,"dir":"/"}`), 404, "not_found", "no such process"},
		{"exec outside a session", "POST", "/exec", []byte(`{"argv":["true"],"dir":"/"}`), 400, "bad_request", "only works from inside a session"},
		{"no endpoint", "GET", "/nope", nil, 404, "not_found", "no endpoint GET /nope"},
		{"wrong method", "PUT", "/sessions", nil, 404, "not_found", "no endpoint PUT /sessions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, e := rawRequest(t, w.socket, tc.method, tc.path, tc.body)
			if status != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("got %d %s %q, want %d %s containing %q", status, e.Code, e.Message, tc.status, tc.code, tc.want)
			}
		})
	}

	// Garbage that is not HTTP, a flood of descriptors, and a client that
	// vanishes mid-request.
	for _, send := range []func(c *net.UnixConn){
		func(c *net.UnixConn) { c.Write([]byte("\x00\xff\xfe GARBAGE \r\n\r\n\r\n")) },
		func(c *net.UnixConn) {
			f, _ := os.Open("/dev/null")
			defer f.Close()
			fds := make([]int, 200)
			for i := range fds {
				fds[i] = int(f.Fd())
			}
			c.WriteMsgUnix([]byte("POST /sessions HTTP/1.1\r\n"), unix.UnixRights(fds[:250/4]...), nil)
		},
		func(c *net.UnixConn) {
			c.Write([]byte("POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"argv\":"))
		},
	} {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: w.socket, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		send(c)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		c.Read(make([]byte, 512))
		c.Close()
	}
	if status, _ := rawRequest(t, w.socket, "GET", "/health", nil); status != http.StatusOK {
		t.Fatalf("daemon unhealthy after garbage: %d", status)
	}
}

func TestCheckDoomLoop(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	writeFile(t, filepath.Join(w.ws, ".openoxide", "config.toml"), "[[permissions.rules]]\ntool = \"bash\"\npattern = \"ls *\"\naction = \"allow\"\n", nobody)
	c := &Client{Socket: w.socket}
	check := func(input string) CheckResponse {
		t.Helper()
		r, err := c.Check(context.Background(), CheckRequest{Tool: "bash", Input: input, Workspace: w.ws})
		if err != nil {
			t.Fatalf("check %q: %v", input, err)
		}
		return r
	}
	for i, want := range []string{"allow", "allow", "ask"} {
		r := check("ls -la")
		if r.Action != want {
			t.Fatalf("call %d: %s (%s), want %s", i+1, r.Action, r.Reason, want)
		}
		if want == "ask" && r.Reason != ReasonDoomLoop {
			t.Fatalf("call %d: reason %q, want %s", i+1, r.Reason, ReasonDoomLoop)
		}
	}
	if r := check("ls -l"); r.Action != "allow" {
		t.Fatalf("a different call after the loop: %s, want allow", r.Action)
	}
	if r := check("ls -l && rm -rf x"); r.Action != "ask" || r.Reason == ReasonDoomLoop {
		t.Fatalf("rm chained after ls: %s (%s), want ask by default", r.Action, r.Reason)
	}
	if _, err := c.Check(context.Background(), CheckRequest{Tool: "bash", Input: "ls"}); err == nil || !strings.Contains(err.Error(), "workspace: required") {
		t.Fatalf("check without a session or workspace: %v", err)
	}
}

// The client forwards terminal signals to the command (which is not in the
// client's process group), and a client that dies takes its session with
// it.
func TestRunSignalsAndClientDeath(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	startRun := func(script string) (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(helper, clientArgs("run", w.ws, "sh", "-c", script)...)
		cmd.Dir = w.ws
		cmd.Env = []string{"PATH=/usr/bin:/bin", helperSocketEnv + "=" + w.socket}
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credentialFor(nobody)}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, out
	}
	waitSession := func() string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if ids, _ := cgroupSessions(w); len(ids) == 1 {
				if st, err := w.opts.Registry.Get(ids[0]); err == nil && st.PID > 0 {
					return ids[0]
				}
			}
		}
		t.Fatal("no running session appeared")
		return ""
	}
	waitGone := func(id string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if ids, _ := cgroupSessions(w); !strings.Contains(strings.Join(ids, " "), id) {
				return
			}
		}
		t.Fatalf("session %s still exists", id)
	}

	cmd, out := startRun(`trap 'echo got-INT; exit 42' INT; echo ready; while :; do sleep 0.05; done`)
	waitSession()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), "ready") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 42 || !strings.Contains(out.String(), "got-INT") {
		t.Fatalf("after SIGINT to the client: %v, output %q; want the command's trap and exit 42", err, out.String())
	}

	cmd, _ = startRun(`sleep 60`)
	id := waitSession()
	cmd.Process.Kill()
	cmd.Wait()
	waitGone(id)
}

// The daemon finds its cgroup2 mount once: the Config every run request
// hands on already names it.
func TestNewResolvesTheCgroupMount(t *testing.T) {
	want, err := cgroup.Cgroup2Mount()
	if err != nil {
		t.Fatalf("this test needs a cgroup2 mount: %v", err)
	}
	dir := t.TempDir()
	srv, err := New(Options{Socket: filepath.Join(dir, "api.sock"), AuditPath: filepath.Join(dir, "audit.jsonl"), Log: io.Discard,
		Cgroup: cgroup.Config{Parent: "oxtest-resolve"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.opts.Cgroup; got.Mount != want || got.Parent != "oxtest-resolve" {
		t.Errorf("the server's cgroup config is %+v, want mount %s and the parent given", got, want)
	}
}
