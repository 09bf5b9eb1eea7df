// Package treescan finds the entries of a directory tree that a classifier
// picks, for the scans a session start makes of its writable roots
// (existing protected entries, deny-read globs). It remembers, per
// directory, what the classifier said about the directory's entries, keyed
// by the directory's identity and change time, so that a later scan of an
// unchanged directory costs one lstat instead of reading every entry: the
// work of a start grows with the number of directories, and of directories
// changed since the last start, not with the number of files (DESIGN §10).
// One walk answers several questions (ScanAll: the protected entries and
// the deny-read globs of a workspace), and the lookups of the remembered
// directories, the whole price of an unchanged tree, are spread over the
// cores, on threads with the scanner's own file access when it has one
// (a daemon scanning as a user). A question's Answer says how many
// directories it could not read, so that a caller with other access knows
// whether the answer is the tree's or only what that access could see.
//
// Why the change time (ctime) and not the modification time: a session may
// set a directory's mtime back (utimensat is a metadata write inside its
// writable roots), but ctime is set by the kernel on every change of the
// directory's entries or metadata, utimensat included, and no process
// without CAP_SYS_TIME can choose it. A directory whose ctime lies within
// RacyWindow of the scan is never remembered (the "racy git" rule): with
// coarse timestamps a change made in the same clock tick as the scan could
// otherwise leave the ctime unchanged. Only ctimes the kernel keeps
// itself count: a root on a FUSE or network filesystem (whose
// ctimes a daemon or server reports) is read in full on every scan, and
// a directory on another filesystem than its root's is never remembered.
//
// The cache is a file per (root, key of the questions) in a directory that only
// the caller's user may write; a cache directory that others could write is
// not used, so a confined session cannot forge what the next start skips.
package treescan

import (
	"errors"
	"io/fs"
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
	// Classify is the question a Scan answers; ScanAll takes its
	// questions separately and ignores Classify and Limit.
	Classify Classifier
	// Key names the classifier, or ScanAll's questions together (for
	// example a digest of the patterns they apply): a cache written under
	// another key is never used.
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

// Question is one of the questions a ScanAll answers in one walk.
type Question struct {
	Classify Classifier
	// Limit bounds the entries this question considers (0: no bound).
	// Reaching it ends this question, and only it, with ErrLimit and what
	// it picked so far.
	Limit int
}

// Answer is what one Question found.
type Answer struct {
	Picked []Entry
	// Entries counts the entries the question considered: those of the
	// directories it was asked about (it did not prune or pick one of
	// their ancestors), from the file system or from the cache.
	Entries int
	// Unread counts the directories the question asked about that could
	// not be read or looked up (no permission, gone meanwhile): what lies
	// below them was not considered. With none, the answer is the tree's,
	// whoever walked it; with some, a walk with other file access may pick
	// more.
	Unread int
	// Err is ErrLimit when the question reached its Limit.
	Err error
}

// Result is what a Scan found and what it cost. ScanAll leaves Picked
// empty (each Answer has its own) and counts in Entries every entry any
// question considered.
type Result struct {
	Picked []Entry
	// Entries counts the entries considered, from the file system or
	// from the cache.
	Entries int
	// DirsRead and DirsCached count the directories whose entries were
	// read and those whose remembered verdicts were used.
	DirsRead, DirsCached int
	// Unread is Answer.Unread of Scan's question (ScanAll: 0).
	Unread int
	// DirsPrefetched counts the remembered directories looked up in
	// parallel before the walk (prefetch.go).
	DirsPrefetched int
	// CacheUnused says why no cache was used, when one was configured.
	CacheUnused string
}

// FileUID is the uid a scan accesses files as now: the filesystem uid on
// Linux (a daemon scanning with a user's access has set it on its
// thread), the effective uid elsewhere (-1 on Windows). What one uid's
// scan found is complete only for that uid.
func FileUID() int { return fileUID() }
