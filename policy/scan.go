package policy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxScanEntries bounds the walk that turns protected patterns into
// existing paths; beyond it Compiled.ProtectedPathsComplete is false and a
// warning says so (the patterns themselves still cover everything).
const maxScanEntries = 200_000

// scanner finds the existing entries protected patterns resolve to.
type scanner struct {
	c       *Compiled
	warn    io.Writer
	entries int
	limit   int
}

func (s *scanner) addPath(a Anchor) {
	if !slices.ContainsFunc(s.c.ProtectedPaths, func(b Anchor) bool { return b.Path == a.Path && b.Ino == a.Ino }) {
		s.c.ProtectedPaths = append(s.c.ProtectedPaths, a)
	}
}

// matchPattern reports the pattern whose components end at rel's last
// components, respecting the entry type.
func (s *scanner) matchPattern(rel []string, isDir bool) *ProtectedPattern {
	for i := range s.c.ProtectedPatterns {
		p := &s.c.ProtectedPatterns[i]
		n := len(p.Components)
		if n > len(rel) {
			continue
		}
		tail := rel[len(rel)-n:]
		ok := true
		for j, comp := range p.Components {
			if comp != "*" && comp != tail[j] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if p.Type == EntryDir && !isDir || p.Type == EntryFile && isDir {
			continue
		}
		return p
	}
	return nil
}

func (s *scanner) scan(root string) error {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			// Unreadable subtrees cannot hold entries we must find to
			// protect writes the agent could not make either.
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if path == root {
			return nil
		}
		s.entries++
		if s.entries > s.limit {
			s.c.ProtectedPathsComplete = false
			fmt.Fprintf(s.warn, "oxsupervise: warning: stopped scanning %s for protected entries after %d entries; protection of not-yet-listed entries relies on name patterns\n", root, s.limit)
			return fs.SkipAll
		}
		rel, _ := filepath.Rel(root, path)
		comps := strings.Split(filepath.ToSlash(rel), "/")
		isLink := d.Type()&fs.ModeSymlink != 0
		if d.Name() == ".git" && d.Type().IsRegular() {
			if err := s.gitFile(root, path); err != nil {
				return err
			}
		}
		if p := s.matchPattern(comps, d.IsDir()); p != nil || (isLink && s.matchPattern(comps, true) != nil) {
			if p == nil {
				p = s.matchPattern(comps, true)
			}
			if err := s.protect(root, path, isLink, p.Source); err != nil {
				return err
			}
			if d.IsDir() {
				return fs.SkipDir // everything below is protected already
			}
			return nil
		}
		if d.IsDir() && len(comps) >= 2 && comps[len(comps)-2] == ".git" && (d.Name() == "objects" || d.Name() == "lfs") {
			return fs.SkipDir
		}
		return nil
	})
	var perr *Error
	if errors.As(err, &perr) {
		return perr
	}
	if err != nil {
		return fmt.Errorf("policy: scan %s for protected entries: %w", root, err)
	}
	return nil
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
		return &Error{Pos: pos{File: path}, Msg: "protected name is a dangling symlink", Hint: "remove it or point it inside " + root}
	}
	if err != nil {
		return &Error{Pos: pos{File: path}, Msg: fmt.Sprintf("protected name is a symlink that cannot be resolved: %v", err)}
	}
	if !within(root, target) {
		return &Error{Pos: pos{File: path}, Msg: fmt.Sprintf("protected name is a symlink to %s, outside the writable root %s", target, root), Hint: "replace the symlink with the real entry; oxsupervise will not guess what to protect"}
	}
	t, err := resolveAnchor(target, src+" (symlink target)")
	if err != nil {
		return err
	}
	s.addPath(t)
	return nil
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
	f, err := os.Open(path)
	if err != nil {
		return nil // unreadable: git cannot use it either
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	line = strings.TrimSpace(line)
	target, ok := strings.CutPrefix(line, "gitdir:")
	if !ok {
		return nil
	}
	target = strings.TrimSpace(target)
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(path), target)
	}
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
		p := filepath.Join(resolved, v)
		a, fi, err := lstatAnchor(p, src)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return &Error{Pos: pos{File: p}, Msg: "git control entry is a symlink", Hint: "replace it with the real file; oxsupervise does not follow symlinks at protected names"}
		}
		s.addPath(a)
	}
	if depth == 0 {
		if b, err := os.ReadFile(filepath.Join(resolved, "commondir")); err == nil {
			common := strings.TrimSpace(string(b))
			if !filepath.IsAbs(common) {
				common = filepath.Join(resolved, common)
			}
			return s.protectGitDir(common, src+" commondir", 1)
		}
	}
	return nil
}
