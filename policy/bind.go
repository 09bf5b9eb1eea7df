package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Unbound is the policy as the resolve step compiled it, before Bind:
// every field that needs no filesystem (mode, network rules, audit,
// limits), no writable or readable root, no protected or denied entry.
// It is for the decisions a caller makes while Bind runs (which programs
// a host loads: planner.Wants); it is not a boundary, and nothing may be
// enforced from it (ProtectedPathsComplete is false).
func (r *Resolved) Unbound() *Compiled {
	c := r.base
	c.ProtectedPatterns = slices.Clone(r.base.ProtectedPatterns)
	c.ProtectedPathsComplete = false
	return &c
}

// Bind runs the bind step: it resolves every path the policy names to the
// filesystem entry it is now (symlinks resolved, device and inode
// recorded), adds /tmp and $TMPDIR to the writable roots when they are
// directories, and scans the writable roots for the existing entries the
// protected patterns match (Compiled.ProtectedPaths). Call it when a
// session's boundary is built, not to answer a permission question. Each
// call looks again; a Resolved can be bound more than once.
func (r *Resolved) Bind() (*Compiled, error) {
	c := r.base
	c.ProtectedPatterns = slices.Clone(r.base.ProtectedPatterns)
	c.ProtectedPathsComplete = true
	home := r.opts.Home
	if h, err := filepath.EvalSymlinks(home); err == nil {
		home = h
	}
	var err error
	if c.WritableRoots, err = r.bindWritableRoots(c.Mode); err != nil {
		return nil, err
	}
	// The profile's grants are cited once they are bound (in copies: the
	// Resolved may be bound again, or read by Unbound).
	c.Network.Allow = slices.Clone(c.Network.Allow)
	citeGrants(&c, c.Agent)
	if c.ReadAccess == ReadAccessRestricted {
		if c.ReadableRoots, err = r.bindReadableRoots(); err != nil {
			return nil, err
		}
	}
	c.ProtectedPaths = []Anchor{}
	if c.FilesystemRules && c.Mode == ModeWorkspaceWrite {
		sc := scanner{c: &c, warn: r.opts.Warn, cache: r.opts.ScanCache, limit: maxScanEntries}
		for _, e := range r.protectedPaths {
			if err := sc.protectExplicit(Anchor{Path: e.path, Source: e.source}); err != nil {
				return nil, err
			}
		}
		for _, root := range c.WritableRoots {
			if root.Source != r.ws.Source && (strings.HasPrefix(root.Source, "default (/tmp") || root.Source == "env TMPDIR") {
				continue // scanning shared temp dirs is slow and racy; patterns cover them
			}
			if !root.Dir {
				continue // a writable file (an agent's state file) holds no entries
			}
			if err := sc.scan(root.Path); err != nil {
				return nil, err
			}
			sc.enclosingRepo(root.Path)
		}
		// Once every root is known: a repository's config may point into
		// another root.
		if err := sc.protectRepos(home, r.opts.Env); err != nil {
			return nil, err
		}
	}
	c.DenyRead = []Anchor{}
	if c.Mode != ModeFullAccess {
		for _, p := range defaultDenyRead() {
			literal := filepath.Join(home, filepath.FromSlash(p))
			a, err := resolveAnchor(literal, "default")
			if err != nil {
				return nil, fmt.Errorf("policy: deny-read %s: %w", p, err)
			}
			c.DenyRead = appendDeny(c.DenyRead, a, literal)
		}
		for _, e := range r.denyRead {
			a, err := resolveAnchor(e.path, e.source)
			if err != nil {
				return nil, &Error{Pos: pos{File: e.source}, Msg: fmt.Sprintf("deny_read %s: %v", e.raw, err)}
			}
			c.DenyRead = appendDeny(c.DenyRead, a, e.path)
		}
	}
	return &c, nil
}

// bindWritableRoots resolves the workspace, the configured roots, /tmp and
// $TMPDIR; a configured root must be an existing directory.
func (r *Resolved) bindWritableRoots(mode Mode) ([]Anchor, error) {
	roots := []Anchor{}
	if mode != ModeWorkspaceWrite {
		return roots, nil
	}
	add := func(a Anchor) {
		if !slices.ContainsFunc(roots, func(b Anchor) bool { return b.Path == a.Path }) {
			roots = append(roots, a)
		}
	}
	add(r.ws)
	for _, e := range r.writableRoots {
		a, err := resolveAnchor(e.path, e.source)
		if err != nil {
			return nil, &Error{Pos: pos{File: e.source}, Msg: fmt.Sprintf("writable root %s: %v", e.raw, err)}
		}
		// An agent profile's state may be a file (~/.claude.json).
		if !a.Exists || !a.Dir && !isProfileSource(e.source) {
			return nil, &Error{Pos: pos{File: e.source}, Msg: fmt.Sprintf("writable root %s (%s) is not an existing directory", e.raw, a.Path), Hint: "create it first or remove it from the policy"}
		}
		add(a)
	}
	if r.slashTmp {
		if a, err := resolveAnchor("/tmp", "default (/tmp; exclude with sandbox.exclude_slash_tmp)"); err == nil && a.Exists && a.Dir {
			add(a)
		}
	}
	if r.tmpdirEnv {
		if t := r.opts.Env("TMPDIR"); t != "" {
			a, err := resolveAnchor(t, "env TMPDIR")
			switch {
			case !filepath.IsAbs(t):
				fmt.Fprintf(r.opts.Warn, "oxsupervise: warning: TMPDIR=%q is not absolute; not made writable\n", t)
			case err != nil || !a.Exists || !a.Dir:
				fmt.Fprintf(r.opts.Warn, "oxsupervise: warning: TMPDIR=%q is not an existing directory; not made writable\n", t)
			default:
				add(a)
			}
		}
	}
	return roots, nil
}

// bindReadableRoots resolves the configured readable roots (each must
// exist) and adds the platform's system directories that exist.
func (r *Resolved) bindReadableRoots() ([]Anchor, error) {
	var roots []Anchor
	for _, e := range r.readableRoots {
		a, err := resolveAnchor(e.path, e.source)
		if err != nil {
			return nil, &Error{Pos: pos{File: e.source}, Msg: fmt.Sprintf("readable root %s: %v", e.raw, err)}
		}
		if !a.Exists {
			return nil, &Error{Pos: pos{File: e.source}, Msg: fmt.Sprintf("readable root %s (%s) does not exist", e.raw, a.Path)}
		}
		roots = append(roots, a)
	}
	for _, p := range platformReadable() {
		if a, err := resolveAnchor(p, "default (platform)"); err == nil && a.Exists {
			if !slices.ContainsFunc(roots, func(b Anchor) bool { return b.Path == a.Path }) {
				roots = append(roots, a)
			}
		}
	}
	return roots, nil
}

// appendDeny adds a deny-read anchor, plus the unresolved path when it
// differs (a symlinked ~/.ssh is denied under both names).
func appendDeny(list []Anchor, a Anchor, literal string) []Anchor {
	has := func(p string) bool { return slices.ContainsFunc(list, func(b Anchor) bool { return b.Path == p }) }
	if !has(a.Path) {
		list = append(list, a)
	}
	if literal != a.Path && !has(literal) {
		if l, _, err := lstatAnchor(literal, a.Source); err == nil {
			list = append(list, l)
		}
	}
	return list
}
