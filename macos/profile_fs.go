package macos

// The filesystem half of the Seatbelt profile: protected entries below the
// writable roots, denied reads and, for restricted reads, the readable roots.

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/openoxide/oxsupervise/policy"
)

// protection is the set of filters that keep protected entries read-only.
type protection struct {
	filters []string // (require-not X) inside write allows; (deny file-write* X) at the end
	labels  []string // rule label per filter
	unlink  []string // filters for ancestors that must not be renamed/removed
}

type denySet struct {
	filters []string
	labels  []string
	unlink  []string
}

// denyReadFilters builds one filter per denied-read anchor and glob, and the
// ancestor filters that stop an anchor being moved somewhere readable.
func (g *generator) denyReadFilters() (denySet, error) {
	var d denySet
	seenAncestor := map[string]bool{}
	for i, a := range g.c.DenyRead {
		p, err := cleanPath("deny_read entry", a.Path)
		if err != nil {
			return d, err
		}
		ref := g.param("DENY_READ", p)
		label := "deny-read-" + strconv.Itoa(i)
		g.rules[label] = "denied read: " + p
		d.filters = append(d.filters, "(require-any (literal "+ref+") (subpath "+ref+"))")
		d.labels = append(d.labels, label)
		for _, anc := range ancestors(p) {
			if seenAncestor[anc] {
				continue
			}
			seenAncestor[anc] = true
			d.unlink = append(d.unlink, "(literal "+g.param("DENY_READ_ANCESTOR", anc)+")")
		}
	}
	for i, glob := range g.c.DenyReadGlobs {
		dir, err := cleanPath("deny_read_globs within", glob.Within)
		if err != nil {
			return d, err
		}
		inc, err := globRegex(glob.Include)
		if err != nil {
			return d, fmt.Errorf("deny_read_globs include (%s): %w", glob.Source, err)
		}
		f := "(require-all (subpath " + g.param("DENY_GLOB_WITHIN", dir) + ") (regex " + regexLiteral("/"+inc+"$") + ")"
		for _, ex := range glob.Exclude {
			exr, err := globRegex(ex)
			if err != nil {
				return d, fmt.Errorf("deny_read_globs exclude (%s): %w", glob.Source, err)
			}
			f += " (require-not (regex " + regexLiteral("/"+exr+"$") + "))"
		}
		f += ")"
		label := "deny-read-glob-" + strconv.Itoa(i)
		g.rules[label] = fmt.Sprintf("denied read: %s below %s (except %v)", glob.Include, dir, glob.Exclude)
		d.filters = append(d.filters, f)
		d.labels = append(d.labels, label)
	}
	return d, nil
}

// protection builds the filters for protected entries: a component regex
// per pattern (any depth, including entries that do not exist yet), a
// literal+subpath parameter per pattern below each writable root (so first
// creation is refused even if regex matching differed), and one per
// resolved protected path.
func (g *generator) protection() (protection, error) {
	var p protection
	seenUnlink := map[string]bool{}
	var roots []string
	for _, a := range g.c.WritableRoots {
		r, err := cleanPath("writable root", a.Path)
		if err != nil {
			return p, err
		}
		roots = append(roots, r)
	}
	for i, pat := range g.c.ProtectedPatterns {
		if len(pat.Components) == 0 {
			return p, fmt.Errorf("protected pattern %d (%s) has no components", i, pat.Source)
		}
		frags := make([]string, len(pat.Components))
		literal := true
		for j, comp := range pat.Components {
			if comp == "*" {
				frags[j] = "[^/]+"
				literal = false
				continue
			}
			f, err := componentRegex(comp)
			if err != nil {
				return p, fmt.Errorf("protected pattern %q (%s): %w", strings.Join(pat.Components, "/"), pat.Source, err)
			}
			frags[j] = f
		}
		label := "protected-" + strconv.Itoa(i)
		desc := "protected entry: " + strings.Join(pat.Components, "/")
		if pat.Type != "" && pat.Type != policy.EntryAny {
			desc += " (" + string(pat.Type) + ")"
		}
		g.rules[label] = desc
		joined := "/" + strings.Join(frags, "/")
		var filter string
		switch pat.Type {
		case policy.EntryFile:
			// A file pattern (".git" as a gitdir: file) must not also
			// freeze the directory of the same name, or git commit breaks.
			filter = "(require-all (regex " + regexLiteral(joined+"$") + ") (require-not (vnode-type DIRECTORY)))"
		case policy.EntryDir, policy.EntryAny, "":
			filter = "(regex " + regexLiteral(joined+"(/|$)") + ")"
		default:
			return p, fmt.Errorf("protected pattern %q (%s): unknown entry type %q", strings.Join(pat.Components, "/"), pat.Source, pat.Type)
		}
		p.filters = append(p.filters, filter)
		p.labels = append(p.labels, label)
		for j := 1; j < len(frags); j++ {
			re := "/" + strings.Join(frags[:j], "/") + "$"
			if !seenUnlink[re] {
				seenUnlink[re] = true
				p.unlink = append(p.unlink, "(regex "+regexLiteral(re)+")")
			}
		}
		if !literal {
			continue
		}
		rel := strings.Join(pat.Components, "/")
		for ri, r := range roots {
			ref := g.param("PROTECTED", path.Join(r, rel))
			plabel := label + "-root-" + strconv.Itoa(ri)
			g.rules[plabel] = desc + " below writable root " + r
			if pat.Type == policy.EntryFile {
				p.filters = append(p.filters, "(require-all (literal "+ref+") (require-not (vnode-type DIRECTORY)))")
			} else {
				p.filters = append(p.filters, "(require-any (literal "+ref+") (subpath "+ref+"))")
			}
			p.labels = append(p.labels, plabel)
		}
	}
	for i, a := range g.c.ProtectedPaths {
		pp, err := cleanPath("protected path", a.Path)
		if err != nil {
			return p, err
		}
		ref := g.param("PROTECTED", pp)
		label := "protected-path-" + strconv.Itoa(i)
		g.rules[label] = "protected path: " + pp
		p.filters = append(p.filters, "(require-any (literal "+ref+") (subpath "+ref+"))")
		p.labels = append(p.labels, label)
		for _, anc := range ancestors(pp) {
			inRoot := false
			for _, r := range roots {
				if within(anc, r) && anc != r {
					inRoot = true
				}
			}
			if !inRoot || seenUnlink["\x00"+anc] {
				continue
			}
			seenUnlink["\x00"+anc] = true
			p.unlink = append(p.unlink, "(literal "+g.param("PROTECTED_ANCESTOR", anc)+")")
		}
	}
	return p, nil
}

// reads emits the read rules: everything but denied anchors, or (restricted)
// only platform, readable and writable roots.
func (g *generator) reads(d denySet, roots []string) error {
	g.line("")
	g.line("; reads (" + string(g.c.ReadAccess) + ")")
	// Metadata of every path (stat, realpath, getcwd walks) is readable;
	// denied anchors are excluded so their existence does not leak.
	g.allow("file-read-metadata", "", d.filters)
	switch g.c.ReadAccess {
	case policy.ReadAccessFull, "":
		g.allow("file-read*", "", d.filters)
	case policy.ReadAccessRestricted:
		var any []string
		for _, p := range platformReadLiterals {
			any = append(any, "(literal "+stringLiteral(p)+")")
		}
		for _, p := range platformReadRoots {
			any = append(any, "(subpath "+stringLiteral(p)+")")
		}
		for _, a := range g.c.ReadableRoots {
			p, err := cleanPath("readable root", a.Path)
			if err != nil {
				return err
			}
			any = append(any, "(subpath "+g.param("READABLE_ROOT", p)+")")
		}
		for _, r := range roots {
			any = append(any, "(subpath "+r+")")
		}
		g.allow("file-read*", "(require-any\n      "+strings.Join(any, "\n      ")+")", d.filters)
	default:
		return fmt.Errorf("unknown read access %q", g.c.ReadAccess)
	}
	return nil
}
