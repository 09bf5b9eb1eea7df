//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/daemon"
	"github.com/openoxide/oxsupervise/internal/procfs"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/session"
)

// cliAsEnv makes this test binary run `oxsupervise ARGS...` (dispatch)
// instead of tests: how the tests play an unprivileged user's CLI.
const cliAsEnv = "OXS_CMDTEST_CLI"

// TestCLIHelperProcess is not a test: it is the entry point of the
// re-executed test binary when cliAsEnv is set.
func TestCLIHelperProcess(t *testing.T) {
	if os.Getenv(cliAsEnv) == "" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(dispatch(args, streams{os.Stdin, os.Stdout, os.Stderr}))
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs cmd (a test binary acting as oxsupervise) and returns its
// exit code and output; a command that could not run at all fails t.
func runCLI(t *testing.T, cmd *exec.Cmd) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return res
}

// cliWorld is a daemon served in-process with its own cgroup parent,
// registry and socket, and a copy of this binary every user can run.
type cliWorld struct {
	base, socket, bin string
	opts              daemon.Options
}

const (
	nobodyUID = 65534
	otherUID  = 64123 // no account needed: the daemon authorizes by uid
)

func newCLIWorld(t *testing.T) *cliWorld {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test serves the daemon and plays other users against it")
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err != nil || !bytes.Contains(b, []byte(" - cgroup2 ")) {
		t.Skip("no cgroup2 mount: the daemon cannot create sessions here")
	}
	base, err := os.MkdirTemp("/var/tmp", "oxs-cmdtest-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	w := &cliWorld{base: base, socket: filepath.Join(base, "run", "api.sock"), bin: filepath.Join(base, "oxsupervise")}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err == nil {
		err = os.WriteFile(w.bin, b, 0o755)
	}
	if err != nil {
		t.Fatalf("copy test binary: %v", err)
	}
	for _, d := range []string{"managed", "log", "ws"} {
		os.MkdirAll(filepath.Join(base, d), 0o755)
	}
	os.Chown(filepath.Join(base, "ws"), nobodyUID, nobodyUID)
	parent := "oxs-cmdtest-" + strconv.Itoa(os.Getpid())
	w.opts = daemon.Options{
		Socket: w.socket, ManagedDir: filepath.Join(base, "managed"), AuditPath: filepath.Join(base, "log", "audit.jsonl"),
		Cgroup: cgroup.Config{Parent: parent}, Registry: session.Registry{Dir: filepath.Join(base, "registry")},
		StateDir: filepath.Join(base, "state"), PinDir: filepath.Join(base, "bpf"), SelfExe: w.bin,
		Log: &bytes.Buffer{},
	}
	t.Cleanup(func() {
		if mnt, err := cgroup.Cgroup2Mount(); err == nil {
			ids, _ := cgroup.ListSessions(w.opts.Cgroup)
			for _, id := range ids {
				session.Stop(context.Background(), w.opts.Cgroup, w.opts.Registry, id)
			}
			os.Remove(filepath.Join(mnt, parent))
		}
		os.RemoveAll(base)
	})
	return w
}

func (w *cliWorld) serve(t *testing.T) {
	t.Helper()
	srv, err := daemon.New(w.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("daemon did not stop within 15s")
		}
	})
	for deadline := time.Now().Add(10 * time.Second); !daemon.Available(w.socket); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon not answering on %s", w.socket)
		}
	}
}

// cli runs `oxsupervise ARGS...` as uid in the workspace.
func (w *cliWorld) cli(t *testing.T, uid int, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(w.bin, append([]string{"-test.run=^TestCLIHelperProcess$", "--"}, args...)...)
	cmd.Dir = filepath.Join(w.base, "ws")
	// A standalone run as root keeps no BPF programs pinned on the machine.
	cmd.Env = []string{"PATH=/usr/bin:/bin", cliAsEnv + "=1", socketEnv + "=" + w.socket, "HOME=/nonexistent", pinDirEnv + "=off"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	return runCLI(t, cmd)
}

func startSleep(t *testing.T, uid int) *os.Process {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process
}

// An unprivileged user's attach, sessions and stop go through the daemon:
// they attach their own process (not root's), see their session (another
// user does not), cannot be stopped by another user, and stop it themself.
// Without a daemon the same user is told stop, attach and run need root or
// the daemon.
func TestSessionVerbsThroughDaemon(t *testing.T) {
	w := newCLIWorld(t)

	// No daemon yet: nothing to go through.
	if res := w.cli(t, nobodyUID, "stop", "s-000000000000"); res.code != exitFail || !strings.Contains(res.stderr, "or the daemon (no daemon answers on "+w.socket) {
		t.Fatalf("stop without a daemon: exit %d, stderr %q", res.code, res.stderr)
	}
	if res := w.cli(t, nobodyUID, "attach", "--pid", "1"); res.code != exitNoBoundary || !strings.Contains(res.stderr, "standalone attach needs root") {
		t.Fatalf("attach without a daemon: exit %d, stderr %q", res.code, res.stderr)
	}
	// run finds no daemon from its run connection alone (no health check
	// first) and says what it needs, with or without --user.
	for _, args := range [][]string{{"run", "--", "true"}, {"run", "--user", "nobody", "--", "true"}} {
		if res := w.cli(t, nobodyUID, args...); res.code != exitNoBoundary || !strings.Contains(res.stderr, "standalone run needs root") {
			t.Fatalf("%v without a daemon: exit %d, stderr %q", args, res.code, res.stderr)
		}
	}

	w.serve(t)
	rootProc := startSleep(t, 0)
	own := startSleep(t, nobodyUID)

	res := w.cli(t, nobodyUID, "attach", "--pid", strconv.Itoa(rootProc.Pid), "--net", "full")
	if res.code != exitFail || !strings.Contains(res.stderr, "only its owner or root may attach it") {
		t.Fatalf("attach of root's process: exit %d, stderr %q", res.code, res.stderr)
	}
	if id, in, _ := cgroup.SessionOf(w.opts.Cgroup, rootProc.Pid); in {
		t.Fatalf("root's process was moved into session %s", id)
	}
	if res := w.cli(t, nobodyUID, "attach", "--pid", strconv.Itoa(own.Pid), "--allow-other-user"); res.code != exitUsage {
		t.Fatalf("attach --allow-other-user through the daemon: exit %d, stderr %q", res.code, res.stderr)
	}

	if !testutil.IndependentLSMProbe(t).Usable() {
		// The policy has filesystem rules and nothing can hold a running
		// process to them here: refused unless asked for network only.
		res = w.cli(t, nobodyUID, "attach", "--pid", strconv.Itoa(own.Pid), "--net", "full")
		if res.code != exitNoBoundary || !strings.Contains(res.stderr, fmt.Sprintf("pid %d: boundary not built", own.Pid)) ||
			!strings.Contains(res.stderr, "attach with --network-only") || !strings.Contains(res.stderr, "remedy: ") {
			t.Fatalf("attach without BPF-LSM: exit %d (want %d), stderr %q", res.code, exitNoBoundary, res.stderr)
		}
		if id, in, _ := cgroup.SessionOf(w.opts.Cgroup, own.Pid); in {
			t.Fatalf("refused attach moved the process into session %s", id)
		}
	}
	res = w.cli(t, nobodyUID, "attach", "--network-only", "--pid", strconv.Itoa(own.Pid), "--net", "full")
	if res.code != exitOK {
		t.Fatalf("attach of own process: exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	id := strings.TrimSpace(res.stdout)
	if got, in, _ := cgroup.SessionOf(w.opts.Cgroup, own.Pid); !in || got != id {
		t.Fatalf("own process is in session %q (%v), want %s printed by attach", got, in, id)
	}

	listed := func(uid int) []string {
		t.Helper()
		res := w.cli(t, uid, "sessions", "--json")
		if res.code != exitOK {
			t.Fatalf("sessions as %d: exit %d, stderr %q", uid, res.code, res.stderr)
		}
		var list []session.Status
		if err := json.Unmarshal([]byte(res.stdout), &list); err != nil {
			t.Fatalf("sessions --json as %d: %q: %v", uid, res.stdout, err)
		}
		var ids []string
		for _, st := range list {
			ids = append(ids, st.ID)
		}
		return ids
	}
	if ids := listed(nobodyUID); len(ids) != 1 || ids[0] != id {
		t.Fatalf("owner sees sessions %v, want exactly %s (the daemon's, not the default registry's)", ids, id)
	}
	if ids := listed(otherUID); len(ids) != 0 {
		t.Fatalf("another user sees sessions %v", ids)
	}
	if res := w.cli(t, nobodyUID, "sessions"); res.code != exitOK || !strings.Contains(res.stdout, id) {
		t.Fatalf("sessions table: exit %d, stdout %q", res.code, res.stdout)
	}

	res = w.cli(t, otherUID, "stop", id)
	if res.code != exitFail || !strings.Contains(res.stderr, "does not belong to uid 64123") {
		t.Fatalf("another user stopping %s: exit %d, stderr %q", id, res.code, res.stderr)
	}
	if !procfs.Alive(own.Pid) {
		t.Fatal("the session's process died after a refused stop")
	}
	if res := w.cli(t, nobodyUID, "stop", id); res.code != exitOK {
		t.Fatalf("owner stopping %s: exit %d, stderr %q", id, res.code, res.stderr)
	}
	st, err := own.Wait()
	if err != nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("stopped session's process: %v %v, want killed by SIGKILL", st, err)
	}
	if ids := listed(nobodyUID); len(ids) != 0 {
		t.Fatalf("sessions after stop: %v", ids)
	}

	// audit tail: the owner reads its ended run session's records through
	// the daemon, another user reads none of them.
	if res := w.cli(t, nobodyUID, "run", "--", "true"); res.code != exitOK {
		t.Fatalf("run through the daemon: exit %d, stderr %q", res.code, res.stderr)
	}
	b, err := os.ReadFile(w.opts.AuditPath)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), `"session":"`)
	runID, _, _ := strings.Cut(after, `"`)
	if !ok || runID == "" {
		t.Fatalf("no session record in the daemon's log:\n%s", b)
	}
	res = w.cli(t, nobodyUID, "audit", "tail", "--json")
	if res.code != exitOK || !strings.Contains(res.stdout, `"session":"`+runID+`"`) {
		t.Fatalf("audit tail as the owner: exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		if !strings.Contains(line, `"session":"`+runID+`"`) {
			t.Errorf("the owner was sent a record of another session: %s", line)
		}
	}
	if res := w.cli(t, otherUID, "audit", "tail", "--json"); res.code != exitOK || strings.TrimSpace(res.stdout) != "" {
		t.Fatalf("audit tail as another user: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if res := w.cli(t, nobodyUID, "audit", "tail", "--session", runID); res.code != exitOK || !strings.Contains(res.stdout, runID) {
		t.Fatalf("audit tail --session (human form): exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

// A standalone run has nobody to approve a lookup: with unknown_hosts =
// "ask" an unlisted name is refused at once (never held), with a resolver
// audit record saying there is no approver.
func TestStandaloneAskRefusesWithoutApprover(t *testing.T) {
	w := newCLIWorld(t)
	if _, err := exec.LookPath("getent"); err != nil {
		t.Skipf("getent not found (%v): no stub resolver client to run in the session", err)
	}
	ws := filepath.Join(w.base, "ws")
	if err := os.MkdirAll(filepath.Join(ws, ".openoxide"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".openoxide", "config.toml"), []byte("[network]\nunknown_hosts = \"ask\"\nask_timeout_seconds = 20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(w.base, "log", "standalone.jsonl")
	start := time.Now()
	// The session's port-53 traffic goes to its own resolver on loopback,
	// whatever server resolv.conf names: nothing leaves this host.
	res := w.cli(t, 0, "run", "--audit-log", auditLog, "--net", "allowlist", "--allow-net", "198.51.100.9", "--", "getent", "hosts", "unknown.ask.test")
	took := time.Since(start)
	if res.code == exitNoBoundary {
		t.Skipf("the standalone network layer cannot be built here (exit 125): %s", res.stderr)
	}
	if res.code == 0 || strings.TrimSpace(res.stdout) != "" {
		t.Fatalf("getent resolved an unlisted name: exit %d, stdout %q", res.code, res.stdout)
	}
	if took > 15*time.Second {
		t.Errorf("the lookup took %v: held although nobody can approve it", took)
	}
	b, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(line, `"layer":"resolver"`) && strings.Contains(line, `"name":"unknown.ask.test"`) {
			found = true
			if !strings.Contains(line, `"reason":"no-approver"`) {
				t.Errorf("resolver record without the no-approver reason: %s", line)
			}
		}
	}
	if !found {
		t.Fatalf("no resolver record for unknown.ask.test in %s:\n%s", auditLog, b)
	}
}
