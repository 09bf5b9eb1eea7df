//go:build linux

package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/session"
)

// waitFilled waits until the pool's next slot is made (or failed): from
// then on no launcher of the pool is being forked. A fork copies the
// daemon's descriptors, close-on-exec ones included, and the child holds
// them until its exec: a link the daemon closes meanwhile stays in the
// kernel until then.
func (p *slotPool) waitFilled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.awaitFillLocked(false)
}

// waitSlot waits for the daemon's one waiting slot (made after each
// claim, off the request path) and returns its id and launcher pid.
func waitSlot(t *testing.T, w *world) (string, int) {
	t.Helper()
	// A liveness bound, not a speed assertion.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ids, err := cgroup.ListSlots(w.opts.Cgroup)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) > 1 {
			t.Fatalf("slots %v: want one at a time", ids)
		}
		if len(ids) == 1 {
			g, err := cgroup.OpenSession(w.opts.Cgroup, ids[0])
			if err != nil {
				t.Fatal(err)
			}
			if procs, _ := g.Procs(); len(procs) == 1 {
				return ids[0], procs[0]
			}
		}
	}
	t.Fatal("no session slot with its launcher appeared")
	return "", 0
}

// processLive says whether pid is a live process (not gone, not a zombie:
// PID 1 here does not reap orphans).
func processLive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	return !strings.HasPrefix(s[strings.LastIndexByte(s, ')')+1:], " Z")
}

// timingCount is how many timing records of the daemon's log name phase.
func timingCount(log, phase string) int {
	return strings.Count(log, "oxsupervise: timing: "+phase)
}

// The daemon keeps one session slot ready: every run request claims one
// (its debug timing says so), the slot waiting is no session (neither the
// cgroup listing nor the sessions list shows it), and the daemon's stop
// leaves no slot group and no launcher.
func TestDaemonRunsThroughASlot(t *testing.T) {
	w := newWorld(t)
	w.opts.DebugTiming = true
	w.start(t)
	for i := 0; i < 3; i++ {
		if res := w.runHelper(t, nobody, w.ws, nil, "run", w.ws, "sh", "-c", "echo ran"); res.code != 0 || res.stdout != "ran\n" {
			t.Fatalf("run %d: exit %d, stdout %q: %s", i, res.code, res.stdout, res.stderr)
		}
	}
	if n, fallback := timingCount(w.log.String(), "slot claimed"), timingCount(w.log.String(), "no slot"); n != 3 || fallback != 0 {
		t.Fatalf("%d of 3 runs claimed a slot, %d started the normal way:\n%s", n, fallback, w.log.String())
	}
	slot, launcher := waitSlot(t, w)
	if ids, _ := cgroupSessions(w); len(ids) != 0 {
		t.Errorf("session groups with the daemon idle: %v (the slot %s is none)", ids, slot)
	}
	res := w.runHelper(t, 0, w.ws, nil, "sessions")
	var list []session.Status
	if err := json.Unmarshal([]byte(res.stdout), &list); res.code != 0 || err != nil {
		t.Fatalf("sessions: exit %d, %v: %s %s", res.code, err, res.stdout, res.stderr)
	}
	for _, st := range list {
		if st.ID == slot {
			t.Errorf("the sessions list shows the slot: %+v", st)
		}
	}
	w.stop()
	if ids, err := cgroup.ListSlots(w.opts.Cgroup); err != nil || len(ids) != 0 {
		t.Errorf("slots after the daemon's stop: %v (%v)", ids, err)
	}
	if _, err := cgroup.OpenSession(w.opts.Cgroup, slot); err == nil {
		t.Errorf("the slot's group %s is left after the daemon's stop", slot)
	}
	if processLive(launcher) {
		t.Errorf("the slot's launcher %d is alive after the daemon's stop", launcher)
	}
}

// A request the slot cannot serve (a private network namespace: network
// none without the cgroup network layer) starts its session the normal
// way and its timing says why; the next slot is made for what was asked
// last, so the next such request claims one.
func TestDaemonSlotFallback(t *testing.T) {
	w := newWorld(t)
	w.opts.Unavailable = map[string]bool{"network": true}
	w.opts.DebugTiming = true
	w.start(t)
	for i := 0; i < 2; i++ {
		if res := w.runHelper(t, nobody, w.ws, nil, "netrun", w.ws, "none", "-", "true"); res.code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, res.code, res.stderr)
		}
	}
	log := w.log.String()
	if timingCount(log, "no slot (the session needs a private network namespace, the slot has none)") != 1 || timingCount(log, "slot claimed") != 1 {
		t.Fatalf("want the first run started the normal way, saying why, and the second through a slot:\n%s", log)
	}
}

// kill -9 of the daemon: its slot's launcher dies with it (parent-death
// signal), and the next daemon removes the slot's group.
func TestDaemonKill9LeavesNoSlot(t *testing.T) {
	w := newWorld(t)
	d1, _ := w.startDaemonProcess(t)
	slot, launcher := waitSlot(t, w)
	d1.Process.Signal(syscall.SIGKILL)
	d1.Wait()
	for deadline := time.Now().Add(10 * time.Second); processLive(launcher); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the slot's launcher %d outlived its daemon", launcher)
		}
	}
	if ids, _ := cgroupSessions(w); len(ids) != 0 {
		t.Errorf("session groups after the crash: %v (the slot %s is none)", ids, slot)
	}
	w.start(t)
	waitLog(t, w.log, "removed the session slot "+slot)
	if _, err := cgroup.OpenSession(w.opts.Cgroup, slot); err == nil {
		t.Errorf("the crashed daemon's slot group %s is left", slot)
	}
	if next, _ := waitSlot(t, w); next == slot {
		t.Errorf("the new daemon's slot is the crashed one's, %s", slot)
	}
}

// A request that comes while the session before it still runs does not
// wait for that session: the slot due after it is made at once, and the
// request claims it.
func TestDaemonSlotForAConcurrentRequest(t *testing.T) {
	w := newWorld(t)
	w.opts.DebugTiming = true
	w.start(t)
	fifo := filepath.Join(w.ws, "hold")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(fifo, nobody, nobody)
	first := exec.Command(helper, clientArgs("run", w.ws, "sh", "-c", "read x < hold")...)
	first.Dir = w.ws
	first.Env = []string{"PATH=/usr/bin:/bin", helperSocketEnv + "=" + w.socket}
	first.SysProcAttr = &syscall.SysProcAttr{Credential: credentialFor(nobody)}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Process.Kill(); first.Wait() })
	// A liveness bound, not a speed assertion.
	for deadline := time.Now().Add(10 * time.Second); timingCount(w.log.String(), "command executed") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first session's command did not start:\n%s", w.log.String())
		}
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "run", w.ws, "true"); res.code != 0 {
		t.Fatalf("the second run: exit %d: %s", res.code, res.stderr)
	}
	// The first still runs: it waits for a writer of the fifo.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("go\n")
	f.Close()
	if err := first.Wait(); err != nil {
		t.Fatalf("the first run: %v", err)
	}
	if n := timingCount(w.log.String(), "slot claimed"); n != 2 {
		t.Errorf("%d of 2 runs claimed a slot:\n%s", n, w.log.String())
	}
}
