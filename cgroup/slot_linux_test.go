//go:build linux

package cgroup

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSlotNeverListedUnclaimed: a listing running beside the creation of
// slots never takes one for a session (a slot used to be marked only after
// its mkdir, and a listing in between listed it), and a claimed slot is
// listed. Nothing here is timed: the listing runs all the while, and each
// of its results is checked.
func TestSlotNeverListedUnclaimed(t *testing.T) {
	cfg := requireSessions(t)
	const rounds = 200
	var (
		unclaimed sync.Map // ids of slots made and not claimed yet
		seen      atomic.Value
		stop      = make(chan struct{})
		listed    sync.WaitGroup
		listings  atomic.Int64
	)
	listed.Add(1)
	go func() {
		defer listed.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ids, err := ListSessions(cfg)
			if err != nil {
				seen.Store(fmt.Sprintf("ListSessions: %v", err))
				return
			}
			listings.Add(1)
			for _, id := range ids {
				if _, ok := unclaimed.Load(id); ok {
					seen.Store("slot " + id + " was listed as a session before its claim")
				}
			}
		}
	}()
	ctx := context.Background()
	for i := range rounds {
		id := fmt.Sprintf("slot-%d", i)
		// Recorded before the mkdir: a listing may find the group as soon
		// as it exists.
		unclaimed.Store(id, true)
		g, err := NewSlot(cfg, id)
		if err != nil {
			close(stop)
			listed.Wait()
			t.Fatalf("NewSlot: %v", err)
		}
		if kindOf(g.Path) != kindSlot {
			close(stop)
			listed.Wait()
			t.Fatalf("slot %s is not a slot right after NewSlot (its mode: %v): the kernel did not keep the mark of its mkdir", id, modeOf(g.Path))
		}
		if i%2 == 0 {
			unclaimed.Delete(id) // deleted before the claim: a listing after it may show it
			if err := g.MarkClaimed(); err != nil {
				t.Errorf("MarkClaimed: %v", err)
			}
			if ids, err := ListSessions(cfg); err != nil || !slices.Contains(ids, id) {
				t.Errorf("ListSessions after the claim of %s = %v, %v; want it listed", id, ids, err)
			}
		}
		if err := g.Remove(ctx); err != nil {
			t.Errorf("remove %s: %v", id, err)
		}
		unclaimed.Delete(id)
	}
	close(stop)
	listed.Wait()
	if msg, ok := seen.Load().(string); ok {
		t.Error(msg)
	}
	if listings.Load() == 0 {
		t.Error("the listing beside the slots' creation never completed")
	}
	t.Logf("%d listings beside %d slots", listings.Load(), rounds)
}

// TestSlotsOfAnEarlierVersion: a slot marked the way an earlier version did
// (an xattr after the mkdir) is still a slot: ListSlots finds it for removal
// and ListSessions does not list it.
func TestSlotsOfAnEarlierVersion(t *testing.T) {
	cfg := requireSessions(t)
	g := newGroup(t, cfg, Limits{})
	if err := unix.Setxattr(g.Path, slotXattr, []byte{1}, 0); err != nil {
		t.Fatalf("mark %s as an earlier version did: %v", g.Path, err)
	}
	if ids, err := ListSessions(cfg); err != nil || slices.Contains(ids, g.ID) {
		t.Errorf("ListSessions = %v, %v; want no %s", ids, err, g.ID)
	}
	if ids, err := ListSlots(cfg); err != nil || !slices.Contains(ids, g.ID) {
		t.Errorf("ListSlots = %v, %v; want %s", ids, err, g.ID)
	}
}

// TestKindOf: what a listing makes of each group it finds, a group removed
// after the listing's readdir included (it is gone, not a session: the
// VM's slow kernel showed a listing naming such a slot).
func TestKindOf(t *testing.T) {
	cfg := requireSessions(t)
	tests := []struct {
		name string
		make func(t *testing.T) string // the group's directory
		want groupKind
	}{
		{"session", func(t *testing.T) string { return newGroup(t, cfg, Limits{}).Path }, kindSession},
		{"slot", func(t *testing.T) string {
			g, err := NewSlot(cfg, "kind-slot")
			if err != nil {
				t.Fatalf("NewSlot: %v", err)
			}
			t.Cleanup(func() { g.Remove(context.Background()) })
			return g.Path
		}, kindSlot},
		{"claimed slot", func(t *testing.T) string {
			g, err := NewSlot(cfg, "kind-claimed")
			if err != nil {
				t.Fatalf("NewSlot: %v", err)
			}
			t.Cleanup(func() { g.Remove(context.Background()) })
			if err := g.MarkClaimed(); err != nil {
				t.Fatalf("MarkClaimed: %v", err)
			}
			return g.Path
		}, kindSession},
		{"slot of an earlier version", func(t *testing.T) string {
			g := newGroup(t, cfg, Limits{})
			if err := unix.Setxattr(g.Path, slotXattr, []byte{1}, 0); err != nil {
				t.Fatalf("mark %s as an earlier version did: %v", g.Path, err)
			}
			return g.Path
		}, kindSlot},
		{"removed", func(t *testing.T) string {
			g, err := NewSlot(cfg, "kind-removed")
			if err != nil {
				t.Fatalf("NewSlot: %v", err)
			}
			if err := g.Remove(context.Background()); err != nil {
				t.Fatalf("remove: %v", err)
			}
			return g.Path
		}, kindGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.make(t)
			if got := kindOf(dir); got != tt.want {
				t.Errorf("kindOf(%s) = %d, want %d (mode %v)", dir, got, tt.want, modeOf(dir))
			}
		})
	}
}

func modeOf(dir string) string {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err.Error()
	}
	return fi.Mode().String()
}
