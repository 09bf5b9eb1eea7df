package treescan

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// remembered is a loaded cache: the directories' records, and the
// identities of those directories now, looked up before the walk.
type remembered struct {
	dirs []dirRecord // in strictly increasing order of Rel (decodeCache checks)
	now  []lookup    // parallel to dirs; zero until prefetched
	// next is the record find tries first: the one after the last found.
	// The walk visits directories depth first in order of their names,
	// which is the records' order but where a name sorts before '/' (say
	// "a-b" after "a/x"), so an unchanged tree finds each record at once,
	// with no search and no path built for it.
	next int
}

type lookup struct {
	done, ok bool // ok: a directory (else gone, or not a directory now)
	id       dirID
}

// find is the index of rel's record (-1: none).
func (r *remembered) find(rel string) int {
	if r == nil {
		return -1
	}
	i, ok := slices.BinarySearchFunc(r.dirs, rel, func(d dirRecord, rel string) int { return strings.Compare(d.Rel, rel) })
	if !ok {
		return -1
	}
	r.next = i + 1
	return i
}

// findChild is the path of the directory name in the directory at rel,
// and the index of its record (-1: none). When the record is the one
// after the last found, as it is for the walk of an unchanged tree, the
// path is the record's own (no allocation).
func (r *remembered) findChild(rel, name string) (string, int) {
	if r != nil && r.next < len(r.dirs) && isJoin(r.dirs[r.next].Rel, rel, name) {
		i := r.next
		r.next++
		return r.dirs[i].Rel, i
	}
	path := join(rel, name)
	return path, r.find(path)
}

// isJoin reports whether path is join(rel, name).
func isJoin(path, rel, name string) bool {
	if rel == "" {
		return path == name
	}
	return len(path) == len(rel)+1+len(name) && path[len(rel)] == '/' &&
		strings.HasPrefix(path, rel) && strings.HasSuffix(path, name)
}

// lookup is the identity of the directory at rel, whose record is i
// (-1: none), now: the prefetched one when there is one, else looked up.
func (s *scan) lookup(rel string, i int) (dirID, error) {
	if i >= 0 && s.prev.now[i].done {
		if l := s.prev.now[i]; l.ok {
			return l.id, nil
		}
		return dirID{}, errNotDir
	}
	return s.at.lstatDir(rel)
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
	if len(r.dirs) > 0 && r.dirs[0].Rel == "" {
		s.res.DirsPrefetched-- // the root, looked up by Scan
	}
}
