package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/openoxide/oxsupervise/internal/shquote"
	"github.com/openoxide/oxsupervise/internal/treescan"
)

// maxScanEntries bounds the walk that turns protected patterns into
// existing paths; beyond it Compiled.ProtectedPathsComplete is false and a
// warning says so (the patterns themselves still cover everything).
const maxScanEntries = 200_000

// scanner finds the existing entries protected patterns resolve to.
type scanner struct {
	c       *Compiled
	warn    io.Writer
	cache   string // LoadOptions.ScanCache
	entries int
	limit   int
	// repos are the repositories found, for githooks.go.
	repos []gitRepo
}

func (s *scanner) addPath(a Anchor) {
	if !slices.ContainsFunc(s.c.ProtectedPaths, func(b Anchor) bool { return b.Path == a.Path && b.Ino == a.Ino }) {
		s.c.ProtectedPaths = append(s.c.ProtectedPaths, a)
	}
}

// matchPattern reports the pattern whose components end at rel's last
// components, respecting the entry type.
func (s *scanner) matchPattern(rel []string, isDir bool) *ProtectedPattern {
	return s.c.ProtectedMatch(rel, isDir)
}

// scan finds the existing entries of root that the protected patterns
// match (and the gitdir: targets of .git files), through internal/treescan:
// with s.cache set, a directory unchanged since an earlier start costs one
// lstat, so a start does not read every file of a large workspace. The
// same walk answers the deny-read globs of root (scanglob.go), which the
// mount layer would otherwise walk for again.
func (s *scanner) scan(root string) error {
	limit := s.limit - s.entries
	globs := s.globQuestions(root, treescan.MaxQuestions-1)
	questions := []treescan.Question{{Classify: s.classify, Limit: max(limit, 1)}}
	key := s.patternsKey()
	if len(globs) > 0 {
		h := sha256.New()
		io.WriteString(h, key)
		for _, g := range globs {
			questions = append(questions, treescan.Question{Classify: g.classify, Limit: MaxGlobWalk})
			fmt.Fprintf(h, "\x00%s", g.scanKey())
		}
		key = hex.EncodeToString(h.Sum(nil))
	}
	_, answers, err := treescan.ScanAll(root, questions, treescan.Options{Key: key, CacheDir: s.cache})
	if err != nil {
		return fmt.Errorf("policy: scan %s for protected entries: %w", root, err)
	}
	res := answers[0]
	s.entries += res.Entries
	if errors.Is(res.Err, treescan.ErrLimit) {
		s.c.ProtectedPathsComplete = false
		fmt.Fprintf(s.warn, "oxsupervise: warning: stopped scanning %s for protected entries after %d entries; protection of not-yet-listed entries relies on name patterns\n", root, s.limit)
	}
	for i, g := range globs {
		s.bindGlob(g, answers[i+1])
	}
	for _, e := range res.Picked {
		comps := strings.Split(e.Rel, "/")
		isLink := e.Type&fs.ModeSymlink != 0
		if comps[len(comps)-1] == ".git" && e.Type.IsRegular() {
			if err := s.gitFile(root, e.Path); err != nil {
				return err
			}
		}
		switch n := len(comps); {
		case comps[n-1] == ".git" && e.Type.IsDir(): // protect_git = "all" picks the whole directory
			s.addRepo(filepath.Dir(e.Path), e.Path)
		case n >= 2 && comps[n-2] == ".git" && comps[n-1] == "config" && (e.Type.IsRegular() || isLink): // git follows a linked config
			s.addRepo(filepath.Dir(filepath.Dir(e.Path)), filepath.Dir(e.Path))
		}
		p := s.matchPattern(comps, e.Type.IsDir())
		if p == nil && isLink {
			p = s.matchPattern(comps, true)
		}
		if p == nil {
			continue // a .git file no pattern names
		}
		if err := s.protect(root, e.Path, isLink, p.Source); err != nil {
			return err
		}
	}
	return nil
}

// classify is the scan's verdict on one entry from its path and type
// alone (treescan remembers it while the directory is unchanged): protected
// names and .git files are picked, a picked directory is not descended
// into (everything below it is protected already), and git's object store
// is pruned.
func (s *scanner) classify(rel []string, typ fs.FileMode) treescan.Verdict {
	name := rel[len(rel)-1]
	isDir, isLink := typ == fs.ModeDir, typ == fs.ModeSymlink
	if name == ".git" && typ.IsRegular() {
		return treescan.Pick
	}
	if s.matchPattern(rel, isDir) != nil || (isLink && s.matchPattern(rel, true) != nil) {
		return treescan.Pick
	}
	if isDir && len(rel) >= 2 && rel[len(rel)-2] == ".git" && (name == "objects" || name == "lfs") {
		return treescan.Prune
	}
	return treescan.Descend
}

// patternsKey names the classifier for the scan cache: the patterns it
// applies, so a cache written under other patterns is never used.
func (s *scanner) patternsKey() string {
	h := sha256.New()
	io.WriteString(h, "protected-scan/1\x00")
	for _, p := range s.c.ProtectedPatterns {
		fmt.Fprintf(h, "%s\x00%s\x00", p.Type, strings.Join(p.Components, "/"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// protect records a protected entry. A symlink is recorded as the link
// itself and never followed for writes; one that leaves its root is refused
// because the protection would silently apply to the wrong place.
func (s *scanner) protect(root, path string, isLink bool, src string) error {
	a, _, err := lstatAnchor(path, src)
	if err != nil {
		return fmt.Errorf("policy: protected entry %s: %w", path, err)
	}
	s.addPath(a)
	if !isLink {
		return nil
	}
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Error{Pos: pos{File: path}, Msg: "protected name is a dangling symlink", Hint: replaceSymlinkHint(path)}
	}
	if err != nil {
		return &Error{Pos: pos{File: path}, Msg: fmt.Sprintf("protected name is a symlink that cannot be resolved: %v", err), Hint: replaceSymlinkHint(path)}
	}
	if !within(root, target) {
		return &Error{Pos: pos{File: path}, Msg: fmt.Sprintf("protected name is a symlink to %s, outside the writable root %s", target, root), Hint: replaceSymlinkHint(path)}
	}
	t, err := resolveAnchor(target, src+" (symlink target)")
	if err != nil {
		return err
	}
	s.addPath(t)
	return nil
}

// replaceSymlinkHint is the exact command that fixes a symlink at a
// protected name that setup will not follow (a session may have planted
// it): the real entry in its place, or none when the link points nowhere.
func replaceSymlinkHint(path string) string {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "remove it: rm " + shquote.Quote(path)
	}
	return "replace the symlink with the real entry (oxsupervise will not guess what to protect): rm " +
		shquote.Quote(path) + " && cp -a " + shquote.Quote(target) + " " + shquote.Quote(path)
}

func (s *scanner) protectExplicit(a Anchor) error {
	fi, err := os.Lstat(a.Path)
	if errors.Is(err, fs.ErrNotExist) {
		r, err := resolveAnchor(a.Path, a.Source)
		if err != nil {
			return err
		}
		s.addPath(r)
		return nil
	}
	if err != nil {
		return fmt.Errorf("policy: protected path %s: %w", a.Path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return s.protect(filepath.Dir(a.Path), a.Path, true, a.Source)
	}
	r, err := resolveAnchor(a.Path, a.Source)
	if err != nil {
		return err
	}
	s.addPath(r)
	return nil
}

// gitFile protects what a `.git` file's gitdir: line points at: the code
// execution vectors of that git directory (or all of it under
// protect_git = "all"), and those of its commondir.
func (s *scanner) gitFile(root, path string) error {
	target, ok := readGitdirFile(path)
	if !ok {
		return nil // unreadable, or no gitdir: line: git cannot use it either
	}
	s.addRepo(filepath.Dir(path), target)
	return s.protectGitDir(target, path+" gitdir", 0)
}

func (s *scanner) protectGitDir(dir, src string, depth int) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil // gitdir points nowhere yet; the patterns cover a later one
	}
	all := slices.ContainsFunc(s.c.ProtectedPatterns, func(p ProtectedPattern) bool {
		return len(p.Components) == 1 && p.Components[0] == ".git" && p.Type == EntryAny
	})
	if all {
		a, err := resolveAnchor(resolved, src)
		if err != nil {
			return err
		}
		s.addPath(a)
		return nil
	}
	for _, v := range gitVectors {
		p := filepath.Join(resolved, v.name)
		a, fi, err := lstatAnchor(p, src)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return &Error{Pos: pos{File: p}, Msg: "git control entry is a symlink", Hint: replaceSymlinkHint(p)}
		}
		s.addPath(a)
	}
	if depth == 0 {
		if common, ok := readCommondir(resolved); ok {
			return s.protectGitDir(common, src+" commondir", 1)
		}
	}
	return nil
}
