package treescan

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// MaxQuestions is how many questions one ScanAll answers.
const MaxQuestions = 64

// Scan walks root (a directory; symlinks below it are classified, never
// followed) and returns the entries opts.Classify picks, in lexical order
// of their paths. A subdirectory that cannot be read is skipped: it holds
// nothing that the caller, running with the same access, could be asked to
// protect; it is not remembered, so it is tried again on the next scan.
func Scan(root string, opts Options) (Result, error) {
	if opts.Classify == nil {
		return Result{}, errors.New("treescan: no classifier")
	}
	q := Question{Classify: opts.Classify, Limit: opts.Limit}
	res, answers, err := ScanAll(root, []Question{q}, opts)
	if err != nil {
		return res, err
	}
	res.Picked, res.Entries, res.Unread = answers[0].Picked, answers[0].Entries, answers[0].Unread
	return res, answers[0].Err
}

// ScanAll answers several questions about root in one walk: each
// directory is looked at (an lstat when it is remembered, a read when
// not) once, however many questions ask about it, and the cache holds
// every question's verdicts. A question is asked about a directory unless
// it pruned or picked one of the directory's ancestors; the walk descends
// where any question still asks. answers[i] is questions[i]'s, exactly
// what Scan with that classifier and limit would return; opts.Classify and
// opts.Limit are not used. The error is for the walk as a whole (the root
// unreadable); a question's limit is in its Answer.
func ScanAll(root string, questions []Question, opts Options) (Result, []Answer, error) {
	if len(questions) == 0 || len(questions) > MaxQuestions {
		return Result{}, nil, fmt.Errorf("treescan: %d questions, want 1 to %d", len(questions), MaxQuestions)
	}
	for _, q := range questions {
		if q.Classify == nil {
			return Result{}, nil, errors.New("treescan: no classifier")
		}
	}
	racy := opts.RacyWindow
	switch {
	case racy == 0:
		racy = DefaultRacyWindow
	case racy < 0:
		racy = 0
	}
	s := &scan{
		root: root, opts: opts, questions: questions, answers: make([]Answer, len(questions)),
		live: 1<<len(questions) - 1, notAfter: time.Now().Add(-racy).UnixNano(),
	}
	if len(questions) == MaxQuestions {
		s.live = ^questionSet(0)
	}
	rootID, err := lstatDir(root)
	if err != nil {
		return Result{}, nil, fmt.Errorf("treescan: %s: %w", root, err)
	}
	s.rootDev = rootID.dev
	at, closeAt, err := openAt(root, rootID)
	if err != nil {
		return Result{}, nil, fmt.Errorf("treescan: %s: %w", root, err)
	}
	defer closeAt()
	s.at = at
	var cachePath string
	if opts.CacheDir != "" {
		if why := cacheUsable(opts.CacheDir, root); why != "" {
			s.res.CacheUnused = why
		} else if why := ctimeUntrusted(root); why != "" {
			s.res.CacheUnused = why
		} else {
			cachePath = cacheFile(opts.CacheDir, root, rootID, opts.Key)
			s.prev = loadCache(cachePath, opts.Key, len(questions))
		}
	}
	s.prefetch()
	if err := s.dir("", s.prev.find(""), rootID, s.live); err != nil {
		return s.res, nil, err
	}
	for i := range s.answers {
		slices.SortFunc(s.answers[i].Picked, func(a, b Entry) int { return strings.Compare(a.Rel, b.Rel) })
	}
	prevDirs := 0
	if s.prev != nil {
		prevDirs = len(s.prev.dirs)
	}
	if cachePath != "" && s.changed(prevDirs) {
		// A cache that cannot be written costs the next start a full
		// scan, nothing else.
		_ = saveCache(cachePath, opts.Key, len(questions), s.remember())
	}
	return s.res, s.answers, nil
}

// questionSet has bit i set for question i.
type questionSet uint64

type scan struct {
	root      string
	at        statAt // root, for the lstat of each directory below it
	opts      Options
	questions []Question
	answers   []Answer
	// live are the questions that have not reached their limit.
	live     questionSet
	rootDev  uint64
	notAfter int64       // directories changed after this (ns) are not remembered
	prev     *remembered // nil: nothing remembered
	// What the cache will remember: records of prev used again (by
	// index), and records of directories read.
	keep  []int
	fresh []dirRecord
	res   Result
}

// changed reports whether the cache to write differs from the one read
// (prevDirs records): a directory was read, or one is no longer
// remembered (gone, or no longer asked about). Each directory is visited
// once, so without reads the records kept are prev's exactly when there
// are as many. Rewriting an unchanged cache would cost every start an
// encode and a rename for nothing.
func (s *scan) changed(prevDirs int) bool {
	return s.res.DirsRead > 0 || len(s.keep) != prevDirs
}

// remember is the records the cache will hold.
func (s *scan) remember() []dirRecord {
	out := make([]dirRecord, 0, len(s.keep)+len(s.fresh))
	for _, i := range s.keep {
		out = append(out, s.prev.dirs[i])
	}
	return append(out, s.fresh...)
}

// dirRecord is what is remembered about one directory: its path below
// the root (slash-separated, "" for the root), its identity and
// ctime when it was read, how many entries it had, and the entries some
// question picks or (directories) descends into, with every question's
// verdict on each. The verdicts do not depend on which questions asked
// about the directory, so a record serves every later walk under the key.
type dirRecord struct {
	Rel      string
	Dev, Ino uint64
	Ctime    int64
	Count    int
	Entries  []recEntry
}

type recEntry struct {
	Name     string
	Type     fs.FileMode
	Verdicts []Verdict // one per question
}

// dir scans the directory at rel (slash-separated, "" for the root) whose
// lstat identity is id, for the questions in asked; i is its record in
// prev (-1: none).
func (s *scan) dir(rel string, i int, id dirID, asked questionSet) error {
	var rec dirRecord
	if i >= 0 {
		rec = s.prev.dirs[i]
	}
	cached := i >= 0 && rec.Dev == id.dev && rec.Ino == id.ino && rec.Ctime == id.ctime
	if cached {
		s.res.DirsCached++
	} else {
		var err error
		var ok bool
		rec, ok, err = s.read(rel, id)
		if err != nil {
			return err
		}
		s.res.DirsRead++
		if !ok {
			s.unread(asked)
			return nil
		}
	}
	if rec.Dev == id.dev && rec.Ino == id.ino && rec.Ctime == id.ctime && id.ctime != 0 && id.dev == s.rootDev && id.ctime < s.notAfter {
		if cached {
			s.keep = append(s.keep, i)
		} else {
			s.fresh = append(s.fresh, rec)
		}
	}
	for i := range s.questions {
		bit := questionSet(1) << i
		if asked&bit == 0 {
			continue
		}
		a := &s.answers[i]
		if lim := s.questions[i].Limit; lim > 0 && a.Entries+rec.Count > lim {
			// The question ends here, as a walk of its own would.
			a.Err = ErrLimit
			s.live &^= bit
			asked &^= bit
			continue
		}
		a.Entries += rec.Count
	}
	if asked == 0 {
		return nil
	}
	s.res.Entries += rec.Count
	for _, e := range rec.Entries {
		var descend questionSet
		var r string
		for i, v := range e.Verdicts {
			bit := questionSet(1) << i
			if asked&bit == 0 {
				continue
			}
			switch {
			case v == Pick:
				if r == "" {
					r = join(rel, e.Name)
				}
				s.answers[i].Picked = append(s.answers[i].Picked, Entry{Path: filepath.Join(s.root, filepath.FromSlash(r)), Rel: r, Type: e.Type})
			case v == Descend && e.Type == fs.ModeDir:
				descend |= bit
			}
		}
		// A question that reached its limit further down is asked no more.
		if descend &= s.live; descend == 0 {
			continue
		}
		var at int
		if r == "" {
			r, at = s.prev.findChild(rel, e.Name)
		} else {
			at = s.prev.find(r)
		}
		sub, err := s.lookup(r, at)
		if err != nil {
			// Gone or replaced by a non-directory since its parent was
			// read, or not searchable.
			s.unread(descend)
			continue
		}
		if err := s.dir(r, at, sub, descend); err != nil {
			return err
		}
	}
	return nil
}

// unread counts a directory that could not be read or looked up for the
// questions in asked.
func (s *scan) unread(asked questionSet) {
	for i := range s.answers {
		if asked&(1<<i) != 0 {
			s.answers[i].Unread++
		}
	}
}

// read lists the directory and classifies its entries for every question;
// ok is false when it cannot be read. Such a directory is skipped and not
// remembered: whether it can be read may change without its ctime
// changing (the scanner's groups, a transient error), and what it holds
// must then be found.
func (s *scan) read(rel string, id dirID) (rec dirRecord, ok bool, err error) {
	f, err := s.at.openDir(rel)
	if err != nil {
		if rel == "" {
			return dirRecord{}, false, fmt.Errorf("treescan: read %s: %w", s.root, err)
		}
		return dirRecord{}, false, nil
	}
	defer f.Close()
	// The record is of the directory read, which is the one the lookup
	// saw only if its identity and ctime are the same (dir remembers it
	// only then): a directory renamed into place in between is read, not
	// remembered under the other's identity.
	rec = dirRecord{Rel: rel}
	if fi, err := f.Stat(); err == nil {
		rec.Dev, rec.Ino, rec.Ctime = idOf(fi)
	}
	ents, err := f.ReadDir(-1)
	if err != nil {
		if rel == "" {
			return dirRecord{}, false, fmt.Errorf("treescan: read %s: %w", s.root, err)
		}
		return dirRecord{}, false, nil
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	rec.Count = len(ents)
	var comps []string // rel's components, the classifiers' path
	if rel != "" {
		comps = strings.Split(rel, "/")
	}
	verdicts := make([]Verdict, len(s.questions))
	for _, e := range ents {
		typ := e.Type() & fs.ModeType
		c := append(comps[:len(comps):len(comps)], e.Name())
		keep := false
		for i, q := range s.questions {
			verdicts[i] = q.Classify(c, typ)
			keep = keep || verdicts[i] == Pick || verdicts[i] == Descend && typ == fs.ModeDir
		}
		if keep {
			rec.Entries = append(rec.Entries, recEntry{Name: e.Name(), Type: typ, Verdicts: slices.Clone(verdicts)})
		}
	}
	return rec, true, nil
}

func join(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}
