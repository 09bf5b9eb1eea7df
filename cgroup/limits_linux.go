//go:build linux

package cgroup

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/containerd/cgroups/v3/cgroup2"
)

// SetLimits applies limits to the group where cgroup2 has the controller:
// it enables the controller in every ancestor's cgroup.subtree_control
// from the mount down to the parent, then writes the limit. Each limit it
// cannot apply is appended to g.Warnings, not returned as an error: the
// caller decides whether a missing limit is fatal. NewSession calls it
// for a new group; a group created ahead of its session (a daemon's slot)
// gets its session's limits when it is claimed.
func (g *Group) SetLimits(limits Limits) error {
	type wanted struct {
		controller, file string
		value            int64
		res              *cgroup2.Resources
	}
	var want []wanted
	if limits.PidsMax > 0 {
		want = append(want, wanted{"pids", "pids.max", limits.PidsMax, &cgroup2.Resources{Pids: &cgroup2.Pids{Max: limits.PidsMax}}})
	}
	if limits.MemoryMax > 0 {
		memMax := limits.MemoryMax
		want = append(want, wanted{"memory", "memory.max", memMax, &cgroup2.Resources{Memory: &cgroup2.Memory{Max: &memMax}}})
	}
	if len(want) == 0 {
		return nil
	}
	mgr, err := g.manager()
	if err != nil {
		return err
	}
	rootControllers, rootErr := mgr.RootControllers()
	usable := want[:0:0]
	for _, w := range want {
		warn := LimitWarning{Limit: w.file, Value: w.value, Controller: w.controller}
		switch {
		case rootErr != nil:
			warn.Reason = fmt.Sprintf("cannot read the controllers of cgroup2: %v", rootErr)
		case !slices.Contains(rootControllers, w.controller):
			warn.Reason = fmt.Sprintf("%s controller not available in cgroup2 (%s offers: %s)",
				w.controller, filepath.Join(g.mount, "cgroup.controllers"), wordsOrNone(rootControllers))
		default:
			// The library walks every ancestor of the session group below the mount.
			if err := mgr.ToggleControllers([]string{w.controller}, cgroup2.Enable); err != nil {
				warn.Reason = fmt.Sprintf("cannot enable the %s controller for session groups: %v", w.controller, err)
			}
		}
		if warn.Reason != "" {
			g.Warnings = append(g.Warnings, warn)
			continue
		}
		usable = append(usable, w)
	}
	if len(usable) == 0 {
		return nil
	}
	have, err := Controllers(g.Path)
	for _, w := range usable {
		warn := LimitWarning{Limit: w.file, Value: w.value, Controller: w.controller}
		switch {
		case err != nil:
			warn.Reason = fmt.Sprintf("cannot read the session group's controllers: %v", err)
		case !slices.Contains(have, w.controller):
			warn.Reason = fmt.Sprintf("%s controller not delegated to %s (its cgroup.controllers: %s)",
				w.controller, g.Path, wordsOrNone(have))
		default:
			if uerr := mgr.Update(w.res); uerr != nil {
				warn.Reason = fmt.Sprintf("write %s: %v", w.file, uerr)
			}
		}
		if warn.Reason != "" {
			g.Warnings = append(g.Warnings, warn)
		}
	}
	return nil
}
