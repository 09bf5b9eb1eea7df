//go:build linux

package session

import (
	"fmt"
	"io"
	"strings"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/quarantine"
)

// nameWatch is a session's quarantine watch, nil when the plan has none.
type nameWatch struct{ w *quarantine.Watch }

// startNameWatch starts the quarantine watch when the plan asks for one.
// It starts before the launcher's exec gate opens, so that nothing the
// command creates is missed; a watch that cannot start falls back to the
// final check alone (quarantine.Start warns), and only a failure to open
// the roots leaves the session without one, said loudly.
func startNameWatch(plan *Plan, opts RunOptions, id string, caches *sandboxCaches, aud *auditor, warn io.Writer) *nameWatch {
	if !plan.QuarantineNames {
		return nil
	}
	w, err := quarantine.Start(watchOptions(plan, opts, id, caches, aud, warn))
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise: warning: protected names created by session %s will NOT be quarantined: %v\n", id, err)
		return nil
	}
	return &nameWatch{w}
}

// startCreatedCheck starts the check at the session's end of the entries
// the BPF-LSM programs let it create (the .git file of `git worktree add`
// or a submodule: policy.ProtectedPattern.CheckedAtEnd), when they are its
// filesystem layer. Those programs refuse every other protected name,
// and without this check (nil: the roots cannot be opened) they refuse
// these too.
func startCreatedCheck(lp *planner.Plan, plan *Plan, opts RunOptions, id string, caches *sandboxCaches, aud *auditor, warn io.Writer) *nameWatch {
	if !lp.BPFLSM || !opts.Policy.FilesystemRules {
		return nil
	}
	w, err := quarantine.StartReported(watchOptions(plan, opts, id, caches, aud, warn))
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise: warning: session %s may not create .git files (git worktree add, submodules): %v\n", id, err)
		return nil
	}
	return &nameWatch{w}
}

// watchOptions are the quarantine options of session id, whose layers
// plan bound.
func watchOptions(plan *Plan, opts RunOptions, id string, caches *sandboxCaches, aud *auditor, warn io.Writer) quarantine.Options {
	var ignore []string
	if caches != nil {
		// Names in a tool cache take effect nowhere (a module that ships
		// an AGENTS.md is not a project anyone opens there).
		ignore = append(ignore, caches.root)
	}
	return quarantine.Options{
		Session: id, Policy: opts.Policy, Dir: opts.QuarantineDir, Warn: warn, Ignore: ignore, Mounts: plan.mounts,
		InSession: func(pid int) (bool, bool) {
			s, ok, err := cgroup.SessionOf(opts.Cgroup, pid)
			if err != nil {
				return false, false
			}
			return ok && s == id, true
		},
		Report: aud.quarantined,
	}
}

// created is what SessionInfo.Created gets: n's watch, or no value at all
// (not a typed nil) without one.
func (n *nameWatch) created() CreatedEntries {
	if n == nil {
		return nil
	}
	return n.w
}

func (n *nameWatch) close() {
	if n != nil {
		n.w.Close()
	}
}

// quarantined writes the audit record of one moved entry.
func (a *auditor) quarantined(m quarantine.Moved) {
	r := audit.Record{
		Event: audit.Event{Action: "create"},
		File:  &audit.File{Path: m.Path},
		Ox: audit.Ox{Kind: audit.KindDenial, Session: a.id, Layer: audit.LayerQuarantine, Class: audit.ClassFile,
			Decision: "quarantine", Rule: fmt.Sprintf("protected %s (%s)", strings.Join(m.Pattern.Components, "/"), m.Pattern.Source)},
	}
	if m.PID > 0 {
		r.Process = &audit.Process{PID: m.PID}
	}
	if m.Err != nil {
		r.Message = fmt.Sprintf("%s: %s, NOT moved: %v", m.Path, m.Reason, m.Err)
		fmt.Fprintf(a.warn, "oxsupervise: warning: %s\n", r.Message)
	} else {
		r.Message = fmt.Sprintf("%s: %s, moved to %s", m.Path, m.Reason, m.To)
	}
	a.write(r)
}
