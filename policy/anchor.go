package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// This file holds the path arithmetic the resolve step does on strings
// (expandHome, absPath, within) and the two lookups the bind step does on
// the filesystem (resolveAnchor, lstatAnchor).

// expandHome expands a leading ~ or ~/.
func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// absPath expands ~ and makes p absolute relative to base.
func absPath(p, home, base string) string {
	p = expandHome(p, home)
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}

// resolveAnchor resolves symlinks in p and records its identity. A path
// that does not exist yet keeps Exists=false, with its existing ancestors
// resolved, so path-based backends can still name it.
func resolveAnchor(p, src string) (Anchor, error) {
	resolved, err := filepath.EvalSymlinks(p)
	if err == nil {
		fi, err := os.Stat(resolved)
		if err != nil {
			return Anchor{}, fmt.Errorf("stat %s: %w", resolved, err)
		}
		dev, ino := fileID(fi)
		return Anchor{Path: resolved, Dev: dev, Ino: ino, Dir: fi.IsDir(), Exists: true, Source: src}, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return Anchor{}, fmt.Errorf("resolve %s: %w", p, err)
	}
	// Resolve the longest existing prefix; keep the rest literally.
	dir, rest := filepath.Dir(p), filepath.Base(p)
	for dir != filepath.Dir(dir) {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return Anchor{Path: filepath.Join(r, rest), Source: src}, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = filepath.Dir(dir)
	}
	return Anchor{Path: filepath.Join(dir, rest), Source: src}, nil
}

// lstatAnchor records the entry at p itself, never following a symlink.
func lstatAnchor(p, src string) (Anchor, fs.FileInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return Anchor{}, nil, err
	}
	dev, ino := fileID(fi)
	return Anchor{Path: p, Dev: dev, Ino: ino, Dir: fi.IsDir(), Exists: true, Source: src}, fi, nil
}

// within reports whether p is root or below it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
