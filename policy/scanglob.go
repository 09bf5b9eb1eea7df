package policy

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/openoxide/oxsupervise/internal/treescan"
)

// MaxGlobWalk bounds the walk for a deny-read glob's existing entries: a
// tree with more entries than this below the glob's directory fails
// closed (the layers that need the entries refuse to start) instead of
// stalling the start.
const MaxGlobWalk = 200_000

// boundGlob is what the bind step's walk found for one deny-read glob.
type boundGlob struct {
	glob    NameGlob
	matches []string
	// uid is the file-access uid the walk ran with, and complete whether
	// it read every directory it was asked about. A complete walk found
	// what the tree holds, whoever walked it; an incomplete one is only
	// handed to a caller with the same access: a caller with other access
	// (the daemon as root after a bind as the user) walks again, since a
	// directory the one cannot read may be readable to the other.
	uid      int
	complete bool
}

// BoundGlobMatches returns the existing entries matching g that the bind
// step found, in the same walk as the protected entries, when that walk
// read every directory below g's or ran with the file access the caller
// has now; ok is false otherwise (the caller walks with ScanGlob).
func (c *Compiled) BoundGlobMatches(g NameGlob) (matches []string, ok bool) {
	for _, b := range c.boundGlobs {
		if sameGlob(b.glob, g) && (b.complete || b.uid == treescan.FileUID()) {
			return slices.Clone(b.matches), true
		}
	}
	return nil, false
}

func sameGlob(a, b NameGlob) bool {
	return a.Within == b.Within && a.Include == b.Include && slices.Equal(a.Exclude, b.Exclude)
}

// ScanGlob lists the existing entries below g.Within that g matches (see
// NameGlob.classify), through internal/treescan with cache ("" for none),
// stopping with treescan.ErrLimit past limit entries.
func ScanGlob(g NameGlob, limit int, cache string) ([]string, error) {
	res, err := treescan.Scan(g.Within, treescan.Options{Classify: g.classify, Key: g.scanKey(), CacheDir: cache, Limit: limit})
	if err != nil {
		return nil, err
	}
	return entryPaths(res.Picked), nil
}

// classify is the glob's verdict on one entry: an entry whose name
// matches Include and no Exclude is picked; symlinks are neither followed
// nor picked (reading through one reaches a target the rules judge on
// its own), and .git directories are not descended into.
func (g NameGlob) classify(rel []string, typ fs.FileMode) treescan.Verdict {
	name := rel[len(rel)-1]
	switch {
	case typ == fs.ModeDir && name == ".git":
		return treescan.Prune
	case typ == fs.ModeSymlink:
		return treescan.Descend // not a directory: nothing below
	}
	if ok, _ := filepath.Match(g.Include, name); !ok {
		return treescan.Descend
	}
	for _, ex := range g.Exclude {
		if ok, _ := filepath.Match(ex, name); ok {
			return treescan.Descend
		}
	}
	return treescan.Pick
}

// scanKey names the classifier for the scan cache.
func (g NameGlob) scanKey() string {
	return "deny-read-glob/1\x00" + g.Include + "\x00" + strings.Join(g.Exclude, "\x00")
}

func entryPaths(es []treescan.Entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Path)
	}
	return out
}

// globQuestions are the deny-read globs of c below root that the
// protected-entry walk of root answers too (at most max, none already
// bound), so a start walks the workspace once.
func (s *scanner) globQuestions(root string, max int) []NameGlob {
	var out []NameGlob
	for _, g := range s.c.DenyReadGlobs {
		if len(out) == max {
			break
		}
		if g.Within != root || slices.ContainsFunc(s.c.boundGlobs, func(b boundGlob) bool { return sameGlob(b.glob, g) }) {
			continue
		}
		out = append(out, g)
	}
	return out
}

// bindGlob records what the walk found for g; a glob whose walk reached
// its limit stays unbound, and the layer that needs it walks (and fails
// closed) itself.
func (s *scanner) bindGlob(g NameGlob, a treescan.Answer) {
	if a.Err != nil {
		return
	}
	s.c.boundGlobs = append(s.c.boundGlobs, boundGlob{glob: g, matches: entryPaths(a.Picked), uid: treescan.FileUID(), complete: a.Unread == 0})
}
