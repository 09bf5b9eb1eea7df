//go:build linux

package cgroup

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestWaitEnd(t *testing.T) {
	cfg := requireSessions(t)

	t.Run("emptied", func(t *testing.T) {
		g := newGroup(t, cfg, Limits{})
		cmd := exec.Command("sleep", "600")
		startIn(t, g, cmd)
		type result struct {
			end End
			err error
		}
		done := make(chan result, 1)
		go func() {
			end, err := g.WaitEnd(context.Background())
			done <- result{end, err}
		}()
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || r.end != Emptied {
			t.Fatalf("WaitEnd = %v, %v; want Emptied", r.end, r.err)
		}
		if alive(cmd.Process.Pid) {
			t.Errorf("WaitEnd returned while pid %d still runs", cmd.Process.Pid)
		}
		if populated, err := g.Populated(); err != nil || populated {
			t.Errorf("after WaitEnd Populated() = %t, %v", populated, err)
		}
	})

	t.Run("removed", func(t *testing.T) {
		g := &Group{Path: filepath.Join(t.TempDir(), "gone")}
		if end, err := g.WaitEnd(context.Background()); err != nil || end != Removed {
			t.Errorf("WaitEnd on a missing group = %v, %v; want Removed", end, err)
		}
	})

	t.Run("context ends first", func(t *testing.T) {
		g := newGroup(t, cfg, Limits{})
		startIn(t, g, exec.Command("sleep", "600"))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		end, err := g.WaitEnd(ctx)
		if !errors.Is(err, context.Canceled) || end != 0 {
			t.Errorf("WaitEnd with an ended context = %v, %v; want context.Canceled", end, err)
		}
		if populated, err := g.Populated(); err != nil || !populated {
			t.Errorf("Populated() = %t, %v; the sleep should still be in the group", populated, err)
		}
	})
}
