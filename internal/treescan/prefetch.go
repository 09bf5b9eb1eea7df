package treescan

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// remembered is a loaded cache: the directories' records, and the
// identities of those directories now, looked up before the walk.
type remembered struct {
	index map[string]int // slash-separated path below the root → dirs
	dirs  []dirRecord
	now   []lookup // parallel to dirs; zero until prefetched
}

type lookup struct {
	done, ok bool // ok: a directory (else gone, or not a directory now)
	id       dirID
}

// find is the index of rel's record (-1: none).
func (r *remembered) find(rel string) (int, bool) {
	if r == nil {
		return -1, false
	}
	i, ok := r.index[rel]
	if !ok {
		return -1, false
	}
	return i, true
}

// lookup is the identity of the directory at rel now (the prefetched one
// when there is one, else looked up) and the index of its record (-1:
// none).
func (s *scan) lookup(rel string) (dirID, int, error) {
	i, ok := s.prev.find(rel)
	if ok && s.prev.now[i].done {
		if l := s.prev.now[i]; l.ok {
			return l.id, i, nil
		}
		return dirID{}, i, errNotDir
	}
	id, err := s.at.lstatDir(rel)
	return id, i, err
}

// errNotDir is a prefetched lookup that found no directory (the walk
// skips it as it skips a failed lookup of its own).
var errNotDir = errors.New("treescan: not a directory")

// minPrefetch is how many remembered directories make a prefetch worth
// starting threads for.
const minPrefetch = 128

// prefetchChunk is how many lookups a worker claims at a time.
const prefetchChunk = 32

// prefetch looks up every remembered directory (but the root, which Scan
// looked up itself) on all available threads at once. An unchanged tree
// costs one lstat per directory and nothing else, so the lookups are the
// whole price of a start's scan; spread over the cores, they take a
// fraction of the wall time. The lookups are made before any directory is
// read, as the walk itself would: a directory that changed since is
// noticed by its ctime and read after its lookup, and one that changes
// after its lookup is the same race as in a walk that looks it up later.
// A thread scanning with its own file access (a daemon scanning for a
// user: accessShared is false) has its workers take that access on
// threads of their own first (threadAccess.adopt): a lookup with another
// access could fail where the scanner's succeeds and hide a directory
// from the walk. A worker that cannot take it exactly leaves its share to
// the others.
func (s *scan) prefetch() {
	r := s.prev
	workers := min(runtime.GOMAXPROCS(0), 8)
	if r == nil || len(r.dirs) < minPrefetch || workers < 2 {
		return
	}
	var own *threadAccess
	if !accessShared() {
		a, ok := currentAccess()
		if !ok {
			return
		}
		own = &a
	}
	// Workers claim chunks as they go, so a thread the scheduler holds
	// back leaves its share to the others instead of the walk waiting
	// for it. The calling goroutine is one of them.
	var next atomic.Int64
	work := func() {
		for {
			start := int(next.Add(prefetchChunk)) - prefetchChunk
			if start >= len(r.dirs) {
				return
			}
			for i := start; i < min(start+prefetchChunk, len(r.dirs)); i++ {
				if r.dirs[i].Rel == "" {
					continue
				}
				id, err := s.at.lstatDir(r.dirs[i].Rel)
				r.now[i] = lookup{done: true, ok: err == nil, id: id}
			}
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if own != nil && !own.adopt() {
				return
			}
			work()
		}()
	}
	work()
	wg.Wait()
	s.res.DirsPrefetched = len(r.dirs)
	if _, ok := r.index[""]; ok {
		s.res.DirsPrefetched-- // the root, looked up by Scan
	}
}
