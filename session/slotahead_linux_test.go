//go:build linux

package session_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/session"
)

// A standalone run's slot made ahead (SlotAhead) is claimed by its session
// when it serves it; one that does not (no network namespace for a plan
// that asks for one) is closed at the claim, and the session starts the
// normal way; one never claimed is closed by Close. Whatever happens, no
// group or launcher of the slot is left but the session's own.
func TestSlotAhead(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	mount := cgroup2Mount(t)
	self := selfExe(t)
	tests := []struct {
		name string
		// netns is the slot's; runProbe's policy asks for a network
		// namespace. run: a session is run through it, else only Close.
		netns, run bool
		// timing is what the session's timing says of the slot.
		timing string
	}{
		{name: "serves its session", netns: true, run: true, timing: "slot claimed"},
		{name: "cannot serve", netns: false, run: true, timing: "no slot (the session needs a private network namespace, the slot has none): normal start"},
		{name: "never claimed", netns: true, run: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			reg := session.Registry{Dir: filepath.Join(e.base, "registry")}
			a := session.MakeSlotAhead(session.SlotOptions{Registry: reg, SelfExe: self, NetNS: tt.netns})
			t.Cleanup(a.Close)
			id := session.SlotAheadID(a)
			if id == "" {
				t.Fatal("the slot could not be made")
			}
			dir := filepath.Join(mount, cgroup.DefaultParent, id)
			procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			launcher := strings.Fields(string(procs))
			if err != nil || len(launcher) != 1 {
				t.Fatalf("the slot's group %s holds %q (%v), want its launcher alone", dir, procs, err)
			}
			if tt.run {
				pr := runProbe(t, e, reg, a)
				if !strings.Contains(pr.timing, tt.timing) {
					t.Errorf("timing:\n%s\nwant %q", pr.timing, tt.timing)
				}
				if claimed := pr.id == id; claimed != (tt.timing == "slot claimed") {
					t.Errorf("session %s ran in the slot %s: %v", pr.id, id, claimed)
				}
				if sl, why := a.Claim(session.RunOptions{Registry: reg, SelfExe: self}, tt.netns); sl != nil || why == "" {
					t.Errorf("a second Claim = %v, %q; want none, and why", sl, why)
				}
			}
			a.Close()
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("the slot's group %s is left", dir)
			}
			if stat, err := os.ReadFile(fmt.Sprintf("/proc/%s/stat", launcher[0])); err == nil && !strings.Contains(string(stat), ") Z ") {
				t.Errorf("the slot's launcher %s is alive: %s", launcher[0], stat)
			}
		})
	}
}

// RemoveSlots (a daemon's start) removes a slot a dead supervisor left
// (its group empty) and leaves a live one alone (its launcher in it: a
// standalone run's slot made ahead, which its run may be claiming).
func TestRemoveSlotsLeavesLiveOnes(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	mount := cgroup2Mount(t)
	self := selfExe(t)
	e := newEnv(t)
	cfg := cgroup.Config{Parent: "oxsupervise-test-removeslots-" + filepath.Base(e.base)}
	t.Cleanup(func() { os.Remove(filepath.Join(mount, cfg.Parent)) })
	live := session.MakeSlotAhead(session.SlotOptions{Cgroup: cfg, Registry: session.Registry{Dir: filepath.Join(e.base, "registry")}, SelfExe: self})
	t.Cleanup(live.Close)
	liveID := session.SlotAheadID(live)
	if liveID == "" {
		t.Fatal("the live slot could not be made")
	}
	dead, err := cgroup.NewSlot(cfg, "s-deadbeef0001")
	if err != nil {
		t.Fatalf("cgroup.NewSlot: %v", err)
	}
	removed, err := session.RemoveSlots(cfg)
	if err != nil {
		t.Fatalf("RemoveSlots: %v", err)
	}
	if len(removed) != 1 || removed[0] != "s-deadbeef0001" {
		t.Errorf("RemoveSlots removed %v, want only the dead slot", removed)
	}
	if _, err := os.Stat(dead.Path); err == nil {
		t.Errorf("the dead slot %s is left", dead.Path)
	}
	procs, err := os.ReadFile(filepath.Join(mount, cfg.Parent, liveID, "cgroup.procs"))
	if err != nil || len(strings.Fields(string(procs))) != 1 {
		t.Errorf("the live slot %s after RemoveSlots holds %q (%v), want its launcher", liveID, procs, err)
	}
}
