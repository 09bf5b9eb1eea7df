//go:build linux

package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/cgroup"
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
