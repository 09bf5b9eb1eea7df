// Package treescan finds the entries of a directory tree that a classifier
// picks, for the scans a session start makes of its writable roots
// (existing protected entries, deny-read globs). It remembers, per
// directory, what the classifier said about the directory's entries, keyed
// by the directory's identity and change time, so that a later scan of an
// unchanged directory costs one lstat instead of reading every entry: the
// work of a start grows with the number of directories, and of directories
// changed since the last start, not with the number of files (DESIGN §10).
//
// Why the change time (ctime) and not the modification time: a session may
// set a directory's mtime back (utimensat is a metadata write inside its
// writable roots), but ctime is set by the kernel on every change of the
// directory's entries or metadata, utimensat included, and no process
// without CAP_SYS_TIME can choose it. A directory whose ctime lies within
// RacyWindow of the scan is never remembered (the "racy git" rule): with
// coarse timestamps a change made in the same clock tick as the scan could
// otherwise leave the ctime unchanged.
//
// The cache is a file per (root, classifier key) in a directory that only
// the caller's user may write; a cache directory that others could write is
// not used, so a confined session cannot forge what the next start skips.
package treescan

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Verdict is what a Classifier says about one entry.
type Verdict uint8

const (
	// Descend: not picked; a directory is scanned further.
	Descend Verdict = iota
	// Prune: not picked, and a directory is not scanned further.
	Prune
	// Pick: picked; a directory is not scanned further (whatever the
	// caller does with it covers what lies below).
	Pick
)

// Classifier judges an entry from its path components below the root
// (rel, the entry's own name last) and its type (fs.ModeDir,
// fs.ModeSymlink, 0 for a regular file, or another type bit). It must not
// look at the file system: its verdicts are remembered while the
// directory holding the entry is unchanged.
type Classifier func(rel []string, typ fs.FileMode) Verdict

// Entry is a picked entry.
type Entry struct {
	Path string      // absolute: the root joined with the entry's relative path
	Rel  string      // slash-separated, relative to the root
	Type fs.FileMode // as given to the Classifier
}

// Options configure a Scan.
type Options struct {
	Classify Classifier
	// Key names the classifier (for example a digest of the patterns it
	// applies): a cache written under another key is never used.
	Key string
	// CacheDir holds the caches; "" scans without one. It must be a
	// directory owned by the caller's effective uid and writable by
	// nobody else; otherwise Scan does not use it (and says so in
	// Result.CacheUnused).
	CacheDir string
	// Limit bounds the entries a scan considers (0: no bound). Reaching
	// it ends the scan with ErrLimit and what was picked so far.
	Limit int
	// RacyWindow overrides DefaultRacyWindow (tests; negative: zero).
	RacyWindow time.Duration
}

// DefaultRacyWindow is how recent a directory's ctime may be, relative to
// the start of the scan, for its verdicts to be remembered. A second is far
// more than the coarsest kernel timestamp granularity (a jiffy).
const DefaultRacyWindow = time.Second

// ErrLimit ends a scan that reached Options.Limit.
var ErrLimit = errors.New("treescan: entry limit reached")

// Result is what a Scan found and what it cost.
type Result struct {
	Picked []Entry
	// Entries counts the entries considered, from the file system or
	// from the cache.
	Entries int
	// DirsRead and DirsCached count the directories whose entries were
	// read and those whose remembered verdicts were used.
	DirsRead, DirsCached int
	// CacheUnused says why no cache was used, when one was configured.
	CacheUnused string
}

// Scan walks root (a directory; symlinks below it are classified, never
// followed) and returns the entries opts.Classify picks, in lexical order
// of their paths. A subdirectory that cannot be read is skipped: it holds
// nothing that the caller, running with the same access, could be asked to
// protect.
func Scan(root string, opts Options) (Result, error) {
	if opts.Classify == nil {
		return Result{}, errors.New("treescan: no classifier")
	}
	racy := opts.RacyWindow
	switch {
	case racy == 0:
		racy = DefaultRacyWindow
	case racy < 0:
		racy = 0
	}
	s := &scan{root: root, opts: opts, notAfter: time.Now().Add(-racy).UnixNano(), next: map[string]dirRecord{}}
	rootID, err := lstatDir(root)
	if err != nil {
		return Result{}, fmt.Errorf("treescan: %s: %w", root, err)
	}
	s.rootDev = rootID.dev
	var cachePath string
	if opts.CacheDir != "" {
		if why := cacheUsable(opts.CacheDir, root); why != "" {
			s.res.CacheUnused = why
		} else {
			cachePath = cacheFile(opts.CacheDir, root, rootID, opts.Key)
			s.prev = loadCache(cachePath, opts.Key)
		}
	}
	err = s.dir("", nil, rootID)
	slices.SortFunc(s.res.Picked, func(a, b Entry) int { return strings.Compare(a.Rel, b.Rel) })
	if err == nil && cachePath != "" && s.changed(len(s.prev)) {
		// A cache that cannot be written costs the next start a full
		// scan, nothing else.
		_ = saveCache(cachePath, opts.Key, s.next)
	}
	return s.res, err
}

type scan struct {
	root     string
	opts     Options
	rootDev  uint64
	notAfter int64 // directories changed after this (ns) are not remembered
	prev     map[string]dirRecord
	next     map[string]dirRecord
	res      Result
	// reused counts the directories whose remembered record was used
	// and is remembered again unchanged.
	reused int
}

// changed reports whether the cache to write differs from the one read
// (prevDirs records): a directory was read, one is no longer remembered
// (gone, or changed too recently), or one is new. Rewriting an unchanged
// cache would cost every start an encode and a rename for nothing.
func (s *scan) changed(prevDirs int) bool {
	return s.res.DirsRead > 0 || s.reused != prevDirs || len(s.next) != prevDirs
}

// dirRecord is what is remembered about one directory: its identity and
// ctime when it was read, how many entries it had, the entries picked and
// the subdirectories to scan further.
type dirRecord struct {
	Dev, Ino uint64
	Ctime    int64
	Count    int
	Picked   []pickedEntry
	Descend  []string
}

type pickedEntry struct {
	Name string
	Type fs.FileMode
}

// dir scans the directory at rel (slash-separated, "" for the root) whose
// lstat identity is id.
func (s *scan) dir(rel string, comps []string, id dirID) error {
	rec, ok := s.prev[rel]
	if ok && rec.Dev == id.dev && rec.Ino == id.ino && rec.Ctime == id.ctime {
		s.res.DirsCached++
	} else {
		var err error
		rec, err = s.read(rel, comps, id)
		if err != nil {
			return err
		}
		s.res.DirsRead++
	}
	if id.dev == s.rootDev && id.ctime < s.notAfter {
		s.next[rel] = rec
		if ok {
			s.reused++
		}
	}
	if s.opts.Limit > 0 && s.res.Entries+rec.Count > s.opts.Limit {
		return ErrLimit
	}
	s.res.Entries += rec.Count
	for _, p := range rec.Picked {
		r := join(rel, p.Name)
		s.res.Picked = append(s.res.Picked, Entry{Path: filepath.Join(s.root, filepath.FromSlash(r)), Rel: r, Type: p.Type})
	}
	for _, name := range rec.Descend {
		r := join(rel, name)
		sub, err := lstatDir(filepath.Join(s.root, filepath.FromSlash(r)))
		if err != nil {
			continue // gone or replaced by a non-directory since its parent was read
		}
		if err := s.dir(r, append(comps[:len(comps):len(comps)], name), sub); err != nil {
			return err
		}
	}
	return nil
}

// read lists the directory and classifies its entries.
func (s *scan) read(rel string, comps []string, id dirID) (dirRecord, error) {
	rec := dirRecord{Dev: id.dev, Ino: id.ino, Ctime: id.ctime}
	path := filepath.Join(s.root, filepath.FromSlash(rel))
	ents, err := os.ReadDir(path)
	if err != nil {
		if rel == "" {
			return rec, fmt.Errorf("treescan: read %s: %w", path, err)
		}
		return rec, nil // unreadable subtree: skipped, and remembered as empty while unchanged
	}
	rec.Count = len(ents)
	for _, e := range ents {
		typ := e.Type() & fs.ModeType
		switch s.opts.Classify(append(comps[:len(comps):len(comps)], e.Name()), typ) {
		case Pick:
			rec.Picked = append(rec.Picked, pickedEntry{Name: e.Name(), Type: typ})
		case Descend:
			if typ == fs.ModeDir {
				rec.Descend = append(rec.Descend, e.Name())
			}
		}
	}
	return rec, nil
}

func join(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}
