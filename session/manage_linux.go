//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
)

// List joins the registry with the session groups.
func List(cfg cgroup.Config, reg Registry) ([]Status, error) {
	entries, regErr := reg.List()
	ids, err := cgroup.ListSessions(cfg)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, id := range ids {
		live[id] = true
	}
	var out []Status
	seen := map[string]bool{}
	add := func(e Entry) {
		st := Status{Entry: e}
		seen[e.ID] = true
		if !live[e.ID] {
			st.State = "stale"
			out = append(out, st)
			return
		}
		g, err := cgroup.OpenSession(cfg, e.ID)
		if err != nil {
			st.State = "stale"
			out = append(out, st)
			return
		}
		st.Cgroup, st.CgroupID = g.Path, g.CgroupID
		st.Procs, _ = g.Procs()
		switch {
		case e.Kind == KindRun && !processExists(e.SupervisorPID):
			st.State = "orphaned"
		case len(st.Procs) == 0:
			st.State = "empty"
		default:
			st.State = "running"
		}
		out = append(out, st)
	}
	for _, e := range entries {
		add(e)
	}
	for _, id := range ids {
		if !seen[id] {
			add(Entry{ID: id})
			out[len(out)-1].State = "no-registry"
			if len(out[len(out)-1].Procs) == 0 {
				out[len(out)-1].State = "no-registry, empty"
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, regErr
}

// processExists reports whether pid names a process (a reused pid
// counts: the answer errs towards "running").
func processExists(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// Stop kills every process of session id and removes its group and
// registry entry. A `run` supervisor of the session then sees its command
// die and exits.
func Stop(ctx context.Context, cfg cgroup.Config, reg Registry, id string) error {
	g, gerr := cgroup.OpenSession(cfg, id)
	_, rerr := reg.Get(id)
	if gerr != nil && errors.Is(rerr, fs.ErrNotExist) {
		return fmt.Errorf("no such session %q", id)
	}
	if gerr == nil {
		// A `run` supervisor removes its group as soon as its command
		// dies, possibly while Kill still waits: a vanished group is a
		// stopped one.
		gone := func() bool { _, err := os.Stat(g.Path); return errors.Is(err, fs.ErrNotExist) }
		if err := g.Kill(ctx); err != nil && !gone() {
			return fmt.Errorf("stop %s: %w", id, err)
		}
		if err := g.Remove(ctx); err != nil && !gone() {
			return fmt.Errorf("stop %s: %w", id, err)
		}
	}
	return reg.Delete(id)
}
