//go:build linux

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// A restarted daemon adopts the attach sessions a previous one left (with
// their user and policy), stops run sessions whose supervisor died, and
// removes stale records and empty unrecorded groups; a populated group
// nobody recorded is left alone.
func TestAdoptOnStart(t *testing.T) {
	w := newWorld(t)
	reg, cfg := w.opts.Registry, w.opts.Cgroup
	sleepIn := func(id string, uid int) *os.Process {
		t.Helper()
		g, err := cgroup.NewSession(cfg, id, cgroup.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		cmd := execCommand("sleep", "60")
		if uid != 0 {
			cmd.SysProcAttr.Credential = credentialFor(uid)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if err := g.AddProcess(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		return cmd.Process
	}
	dead := execCommand("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(reg.Put(session.Entry{ID: "s-stale0000001", Kind: session.KindRun, UID: nobody, Started: now}))
	if _, err := cgroup.NewSession(cfg, "s-empty0000001", cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	orphan := sleepIn("s-orphan000001", nobody)
	must(reg.Put(session.Entry{ID: "s-orphan000001", Kind: session.KindRun, SupervisorPID: dead.Process.Pid, PID: orphan.Pid, UID: nobody, Started: now}))
	kept := sleepIn("s-keep00000001", nobody)
	must(reg.Put(session.Entry{ID: "s-keep00000001", Kind: session.KindAttach, PID: kept.Pid, UID: nobody, Started: now}))
	st, _ := json.Marshal(managedState{ID: "s-keep00000001", UID: nobody, GID: nobody, Home: "/nonexistent", User: "nobody",
		Workspace: w.ws, Policy: &policy.Compiled{Mode: policy.ModeWorkspaceWrite, AllowUnsandboxedCommands: true}})
	must(os.MkdirAll(w.opts.StateDir, 0o700))
	must(os.WriteFile(filepath.Join(w.opts.StateDir, "s-keep00000001.json"), st, 0o600))
	must(os.WriteFile(filepath.Join(w.opts.StateDir, "s-gone00000001.json"), st, 0o600))
	sleepIn("s-unrec0000001", 0)

	w.start(t)

	if _, err := reg.Get("s-stale0000001"); err == nil {
		t.Error("stale record kept")
	}
	ids, _ := cgroupSessions(w)
	got := strings.Join(ids, " ")
	for _, gone := range []string{"s-empty0000001", "s-orphan000001"} {
		if strings.Contains(got, gone) {
			t.Errorf("group %s kept: %s", gone, got)
		}
	}
	for _, kept := range []string{"s-keep00000001", "s-unrec0000001"} {
		if !strings.Contains(got, kept) {
			t.Errorf("group %s removed: %s", kept, got)
		}
	}
	if st, err := orphan.Wait(); err != nil || st.Success() {
		t.Errorf("orphaned run session's process: %v %v, want killed", st, err)
	}
	w.srv.mu.Lock()
	m := w.srv.sessions["s-keep00000001"]
	w.srv.mu.Unlock()
	if m == nil || m.cred.UID != nobody || m.policy == nil || m.workspace != w.ws {
		t.Fatalf("attach session not adopted with its state: %+v", m)
	}
	if exists(filepath.Join(w.opts.StateDir, "s-gone00000001.json")) {
		t.Error("state of a session that no longer exists was kept")
	}
	// The adopted session is its owner's to see and stop.
	c := &Client{Socket: w.socket}
	list, err := c.Sessions(context.Background())
	if err != nil || len(list) < 2 {
		t.Fatalf("root's session list: %v %v", list, err)
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "stop", "s-keep00000001"); res.code != 0 {
		t.Fatalf("owner stopping the adopted session: %d %s", res.code, res.stderr)
	}
	if _, err := kept.Wait(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.log.String(), "s-unrec0000001 has 1 processes but no record") {
		t.Errorf("daemon log does not report the unrecorded group:\n%s", w.log.String())
	}
}

// A graceful stop (SIGTERM, systemctl stop) with no session left removes
// the daemon's pins; with an attach session left it keeps them, so the
// session stays confined, and the next daemon adopts it into its own
// generation and retires the kept one.
func TestDaemonStopPins(t *testing.T) {
	w := newWorld(t)
	requireSockAddr(t, w)
	usePinDir(t, w)

	w.start(t)
	if gens, _ := pinnedSessions(t, w, "net", "net_sessions"); len(gens) != 1 {
		t.Fatalf("running daemon: pinned generations %+v, want one", gens)
	}
	w.stop()
	if _, err := os.Stat(w.opts.PinDir); !errors.Is(err, os.ErrNotExist) {
		entries, _ := os.ReadDir(filepath.Join(w.opts.PinDir, "net"))
		t.Fatalf("stopped with no session: pin directory kept (%v): %v", err, entries)
	}

	w.start(t)
	sleeper := execCommand("sleep", "60")
	sleeper.SysProcAttr.Credential = credentialFor(nobody)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	ar := w.attachNet(t, sleeper.Process.Pid, "none", "-")
	g, err := cgroup.OpenSession(w.opts.Cgroup, ar.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.stop()
	gens, keys := pinnedSessions(t, w, "net", "net_sessions")
	if len(gens) != 1 || !slices.Contains(keys, g.CgroupID) {
		t.Fatalf("stopped with an attach session: generations %+v with sessions %v, want one holding cgroup %d", gens, keys, g.CgroupID)
	}
	if !strings.Contains(w.log.String(), "attach sessions stay confined by the pinned programs") {
		t.Errorf("the stopping daemon did not say the session stays confined:\n%s", w.log.String())
	}

	w.start(t)
	if !strings.Contains(w.log.String(), "retired generation "+gens[0].Dir) {
		t.Fatalf("the next daemon did not retire the kept generation:\n%s", w.log.String())
	}
	gens2, keys2 := pinnedSessions(t, w, "net", "net_sessions")
	if len(gens2) != 1 || gens2[0].N != gens[0].N+1 || !slices.Contains(keys2, g.CgroupID) {
		t.Fatalf("after adoption: generations %+v with sessions %v, want generation %d holding cgroup %d", gens2, keys2, gens[0].N+1, g.CgroupID)
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "stop", ar.Session.ID); res.code != 0 {
		t.Fatalf("stop the adopted session: %s", res.stderr)
	}
	// The daemon releases a session's rules once its group is gone.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, keys := pinnedSessions(t, w, "net", "net_sessions")
		if !slices.Contains(keys, g.CgroupID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stopped session's entry (cgroup %d) still pinned: %v", g.CgroupID, keys)
		}
	}
	w.stop()
	if _, err := os.Stat(w.opts.PinDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stopped after the last session ended: pin directory kept (%v)", err)
	}
}

// A session the previous daemon's pinned rules confined, whose rules the
// next daemon cannot apply again (here: its saved policy is gone), is
// stopped before the old generation is retired, rather than left running
// unconfined.
func TestDaemonStopsSessionItCannotReconfine(t *testing.T) {
	w := newWorld(t)
	requireSockAddr(t, w)
	usePinDir(t, w)
	w.start(t)
	sleeper := execCommand("sleep", "60")
	sleeper.SysProcAttr.Credential = credentialFor(nobody)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	ar := w.attachNet(t, sleeper.Process.Pid, "none", "-")
	w.stop()
	gens, _ := pinnedSessions(t, w, "net", "net_sessions")
	if len(gens) != 1 {
		t.Fatalf("stopped with an attach session: generations %+v, want one", gens)
	}
	if err := os.Remove(filepath.Join(w.opts.StateDir, ar.Session.ID+".json")); err != nil {
		t.Fatal(err)
	}

	w.start(t)
	if !strings.Contains(w.log.String(), "pins: STOPPED session "+ar.Session.ID) {
		t.Fatalf("the session the new daemon cannot confine was not stopped:\n%s", w.log.String())
	}
	if st, err := sleeper.Process.Wait(); err != nil || st.Success() {
		t.Fatalf("the unconfinable session's process: %v %v, want killed", st, err)
	}
	if ids, _ := cgroupSessions(w); slices.Contains(ids, ar.Session.ID) {
		t.Fatalf("its group is left: %v", ids)
	}
	if gens2, _ := pinnedSessions(t, w, "net", "net_sessions"); len(gens2) != 1 || gens2[0].N == gens[0].N {
		t.Fatalf("generations after the restart %+v, want only a new one", gens2)
	}
}

// A pinned generation the daemon cannot read (here a session map with
// keys that are not cgroup ids, as an incompatible older version might
// leave) is kept and reported, never retired blindly: nobody can tell
// which sessions it confines.
func TestDaemonKeepsUnreadableGeneration(t *testing.T) {
	w := newWorld(t)
	requireSockAddr(t, w)
	usePinDir(t, w)
	old := loader.PinSet{Dir: filepath.Join(w.opts.PinDir, "net")}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "net_sessions", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := os.MkdirAll(filepath.Join(old.Dir, "gen-7", "maps"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := m.Pin(filepath.Join(old.Dir, "gen-7", "maps", "net_sessions")); err != nil {
		t.Fatal(err)
	}
	w.start(t)
	if !strings.Contains(w.log.String(), "KEPT generation "+filepath.Join(old.Dir, "gen-7")) {
		t.Fatalf("the unreadable generation was not reported as kept:\n%s", w.log.String())
	}
	gens, err := old.Generations()
	if err != nil || len(gens) != 2 || gens[0].N != 7 || gens[1].N != 8 {
		t.Fatalf("generations %+v (%v), want the kept 7 and the daemon's 8", gens, err)
	}
	w.stop()
	if gens, _ := old.Generations(); len(gens) != 1 || gens[0].N != 7 {
		t.Fatalf("after a stop with no session: generations %+v, want only the kept 7", gens)
	}
}

// A run session's compiled policy is not saved for a restarted daemon
// (none adopts a run session, whose command dies with its daemon): while
// it runs, the daemon knows it, and the state directory has no file of it.
func TestRunSessionStateNotSaved(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	started, fifo := filepath.Join(w.ws, "started"), filepath.Join(w.ws, "go")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(fifo, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helper, clientArgs("run", w.ws, "sh", "-c", "touch started; read x < go")...)
	cmd.Dir = w.ws
	cmd.Env = []string{"PATH=/usr/bin:/bin", helperSocketEnv + "=" + w.socket}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credentialFor(nobody)}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// A liveness bound, not a speed assertion.
	deadline := time.Now().Add(30 * time.Second)
	for !exists(started) {
		select {
		case err := <-exited:
			t.Fatalf("run exited before its command started: %v\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session's command did not start within 30s\n%s", stderr.String())
		}
	}
	w.srv.mu.Lock()
	var ids []string
	for id := range w.srv.sessions {
		ids = append(ids, id)
	}
	w.srv.mu.Unlock()
	if len(ids) != 1 {
		t.Fatalf("the daemon knows sessions %v, want the one running", ids)
	}
	if exists(filepath.Join(w.opts.StateDir, ids[0]+".json")) {
		t.Errorf("run session %s has a saved state", ids[0])
	}
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x\n")
	f.Close()
	if err := <-exited; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
}
