//go:build linux

package session_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/doctor"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
)

// lsmReason is why the independent probe finds BPF-LSM unusable, as the
// loader would say it: what doctor derives its remedy from.
func lsmReason(v testutil.LSMVerdict) error {
	switch {
	case !v.InList:
		return loader.ErrBPFNotInLSMList
	case v.LoadErr != nil:
		return v.LoadErr
	}
	return v.AttachErr
}

// sessionsOfPID lists the sessions `oxsupervise sessions` knows whose
// recorded pid is pid.
func (e *env) sessionsOfPID(t *testing.T, pid int) []string {
	t.Helper()
	r := e.run(t, nil, "sessions", "--json")
	var list []struct {
		ID  string `json:"id"`
		PID int    `json:"pid"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("sessions --json: %v\n%s", err, r.stdout)
	}
	var ids []string
	for _, s := range list {
		if s.PID == pid {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// TestAttachFailsClosedWithoutBPFLSM: on a kernel without a usable BPF-LSM
// (the independent probe says so), attaching a live process under a
// policy with filesystem rules is refused: exit 125, the process stays in
// its cgroup, and no session group, registry entry, pinned program or
// audit record is left; the message names the pid, what is missing,
// doctor's remedy and --network-only, and none of the loader's words.
// A policy without filesystem rules (external-sandbox) attaches as it is.
// With --network-only the network rules hold: TestNetLayerAttach.
func TestAttachFailsClosedWithoutBPFLSM(t *testing.T) {
	requireRoot(t)
	cg2 := cgroup2Mount(t)
	v := testutil.IndependentLSMProbe(t)
	if v.Usable() {
		t.Skip("SKIPPED, NOT PASSED: BPF-LSM is usable here, so attach holds filesystem rules (session/fsvmtest TestAttachBPFLSM); the refusal needs a kernel without it")
	}
	e := newEnv(t)
	sleeper := exec.Command("sleep", "1000")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	pid := sleeper.Process.Pid
	before := cgroupOf(pid)
	if before == "" || strings.Contains(before, "/oxsupervise/") {
		t.Fatalf("sleep %d starts in cgroup %q", pid, before)
	}
	groupsBefore := map[string]bool{}
	for _, g := range sessionGroups(t, cg2) {
		groupsBefore[g] = true
	}

	for _, mode := range []string{"workspace-write", "read-only"} {
		t.Run(mode, func(t *testing.T) {
			pins, err := os.MkdirTemp("/sys/fs/bpf", "oxs-attach-refused-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(pins) })
			log := filepath.Join(e.base, mode+"-audit.jsonl")
			r := e.run(t, []string{"OXSUPERVISE_PIN_DIR=" + pins}, "attach", "--sandbox", mode, "--audit-log", log, "--pid", strconv.Itoa(pid))
			if r.code != 125 || r.stdout != "" {
				t.Fatalf("attach without BPF-LSM: exit %d (want 125), stdout %q\n%s", r.code, r.stdout, r.stderr)
			}
			for _, want := range []string{fmt.Sprintf("pid %d", pid), "boundary not built", "layer bpf-lsm", "mode " + mode,
				"need BPF-LSM", "not usable on this machine", "attach with --network-only", "nothing was moved", "remedy: "} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("message lacks %q:\n%s", want, r.stderr)
				}
			}
			// The remedy is doctor's for this machine's reason.
			if rem, ok := doctor.BPFLSMRemedy(lsmReason(v)); !ok || !strings.Contains(r.stderr, rem.Format("remedy")) {
				t.Errorf("message lacks doctor's remedy %q:\n%s", rem.Format("remedy"), r.stderr)
			}
			for _, dont := range []string{"RemoveMemlock", "MEMLOCK", "probe:", "BPF_LSM_MAC program on"} {
				if strings.Contains(r.stderr, dont) {
					t.Errorf("message shows the loader's words %q:\n%s", dont, r.stderr)
				}
			}
			if got := cgroupOf(pid); got != before {
				t.Errorf("sleep %d moved from %s to %s although attach refused", pid, before, got)
			}
			for _, g := range sessionGroups(t, cg2) {
				if !groupsBefore[g] {
					t.Errorf("session group %s left behind", g)
				}
			}
			if ids := e.sessionsOfPID(t, pid); len(ids) > 0 {
				t.Errorf("sessions registered for pid %d: %v", pid, ids)
			}
			if left, _ := os.ReadDir(pins); len(left) > 0 {
				t.Errorf("pins left in %s: %v", pins, left)
			}
			if b, err := os.ReadFile(log); err == nil && len(b) > 0 {
				t.Errorf("audit records of a session that never started:\n%s", b)
			}
		})
	}

	t.Run("wrong-pid-first", func(t *testing.T) {
		// A pid attach must not touch is reported as such, before
		// whether a boundary could be built for it.
		r := e.run(t, nil, "attach", "--pid", "999999999")
		if r.code != 1 || !strings.Contains(r.stderr, "pid 999999999: no such process") || strings.Contains(r.stderr, "BPF-LSM") {
			t.Errorf("attach of a missing pid: exit %d (want 1), stderr %q", r.code, r.stderr)
		}
	})
	t.Run("external-sandbox", func(t *testing.T) {
		// No filesystem rules by design: nothing for BPF-LSM to hold. Full
		// network with every loopback service needs no layer in attach's
		// process, so it returns with the session running.
		r := e.run(t, nil, "attach", "--config", e.cgroupOnly(t), "--sandbox", "external-sandbox", "--pid", strconv.Itoa(pid))
		if r.code != 0 {
			t.Fatalf("attach external-sandbox: exit %d\n%s", r.code, r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		defer e.run(t, nil, "stop", id)
		if got := cgroupOf(pid); got != "/oxsupervise/"+id {
			t.Errorf("sleep %d in %s, want session %s", pid, got, id)
		}
		if strings.Contains(r.stderr, "filesystem rules") {
			t.Errorf("external-sandbox warned about filesystem rules it does not have:\n%s", r.stderr)
		}
	})
}
