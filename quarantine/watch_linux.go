//go:build linux

package quarantine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/internal/pollset"
	"github.com/openoxide/oxsupervise/policy"
)

// watchMask: entries created and entries renamed into place, directories
// included (mkdir .claude, mv staging .claude).
const watchMask = unix.FAN_CREATE | unix.FAN_MOVED_TO | unix.FAN_ONDIR

// maxMovedDirWalk bounds the walk of a directory renamed into a root (its
// subtree may hold protected names no event reports); beyond it the final
// check walks the roots instead.
const maxMovedDirWalk = 20000

// maxFinalWalk bounds the final walk of the roots, as the policy's own
// compile-time scan is bounded.
const maxFinalWalk = 200000

// Watch is a running watch of one session's writable roots.
type Watch struct {
	opts  Options
	c     *policy.Compiled
	dir   string
	names map[string]bool
	roots []root
	start time.Time
	fan   int // -1: no fanotify, the final walk does all the work
	wake  int // eventfd that stops the loop
	// events is the loop's wait on fan and wake, which holds no thread
	// for the session's length (pollset).
	events      *pollset.Set
	done        chan struct{}
	byFSID      map[[2]int32]int
	mu          sync.Mutex
	moved       []Moved
	deferredSet map[string]bool
	walkAll     bool // an overflow or a root without a mark: walk at Close
	// reported: the entries come from a kernel layer (Created) instead of
	// fanotify, and it refused every protected name but CheckedAtEnd ones.
	reported bool

	// handling is held while events are read and handled, by the loop
	// or by Close's final drain; stopped (set by Close, under it) says
	// the loop must not read again.
	handling sync.Mutex
	stopped  bool
}

type root struct {
	path string
	fd   int // O_PATH, the base of every move below it
}

// openRoots opens every writable root directory: the base of moves.
func (w *Watch) openRoots() error {
	for _, a := range w.c.WritableRoots {
		if !a.Exists || !a.Dir || w.ignored(a.Path) {
			continue // a writable file (an agent's state) holds no names
		}
		fd, err := unix.Open(a.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			w.closeFDs()
			return fmt.Errorf("quarantine: open writable root %s: %w", a.Path, err)
		}
		w.roots = append(w.roots, root{path: a.Path, fd: fd})
	}
	return nil
}

// Start watches the writable roots of opts.Policy. It never fails a
// session: without fanotify (old kernel, no CAP_SYS_ADMIN) it warns, and
// Close walks the roots instead.
func Start(opts Options) (*Watch, error) {
	w := &Watch{opts: opts, c: opts.Policy, dir: opts.Dir, names: opts.Policy.ProtectedNames(), start: time.Now(),
		fan: -1, wake: -1, byFSID: map[[2]int32]int{}, deferredSet: map[string]bool{}}
	if w.dir == "" {
		w.dir = DefaultDir
	}
	if w.opts.Warn == nil {
		w.opts.Warn = io.Discard
	}
	if err := w.openRoots(); err != nil {
		return nil, err
	}
	fan, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK|unix.FAN_REPORT_DFID_NAME, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_LARGEFILE)
	if err != nil {
		fmt.Fprintf(w.opts.Warn, "oxsupervise: warning: no fanotify watch of protected names (%v): they are checked when the session ends only\n", err)
		w.walkAll = true
		return w, nil
	}
	w.fan = fan
	for _, p := range w.markPoints() {
		if err := unix.FanotifyMark(fan, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, watchMask, unix.AT_FDCWD, p); err != nil {
			fmt.Fprintf(w.opts.Warn, "oxsupervise: warning: cannot watch %s for protected names (%v): it is checked when the session ends\n", p, err)
			w.walkAll = true
			continue
		}
		if err := w.addFS(p); err != nil {
			fmt.Fprintf(w.opts.Warn, "oxsupervise: warning: %v: checked when the session ends\n", err)
			w.walkAll = true
		}
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		w.closeFDs()
		return nil, fmt.Errorf("quarantine: eventfd: %w", err)
	}
	w.wake = wake
	if w.events, err = pollset.New(fan, wake); err != nil {
		w.closeFDs()
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	w.done = make(chan struct{})
	go w.loop()
	return w, nil
}

// StartReported is Start for a session whose kernel layer (BPF-LSM)
// refuses every protected name but the CheckedAtEnd ones (git's .git
// files and worktree commondirs), lets the session create those and
// reports each: Created hears of them, and Close checks them. Nothing
// watches or walks the roots unless a report went missing (Incomplete)
// or an entry reported is no longer where it was made (a directory above
// it was renamed): then Close walks the roots for new CheckedAtEnd
// entries, as the Landlock path's Close does after a queue overflow.
func StartReported(opts Options) (*Watch, error) {
	w := &Watch{opts: opts, c: opts.Policy, dir: opts.Dir, start: time.Now(), fan: -1, wake: -1,
		byFSID: map[[2]int32]int{}, deferredSet: map[string]bool{}, reported: true}
	if w.dir == "" {
		w.dir = DefaultDir
	}
	if w.opts.Warn == nil {
		w.opts.Warn = io.Discard
	}
	if err := w.openRoots(); err != nil {
		return nil, err
	}
	return w, nil
}

// Created records an entry of a CheckedAtEnd pattern the session made, as
// its kernel layer reported it, for Close to check.
func (w *Watch) Created(path string) {
	w.mu.Lock()
	w.deferredSet[path] = true
	w.mu.Unlock()
}

// Incomplete says that reports of entries the session created may be
// missing (why says how): Close walks the roots instead of trusting them.
func (w *Watch) Incomplete(why string) {
	fmt.Fprintf(w.opts.Warn, "oxsupervise: warning: %s: the writable roots are walked for new .git files when the session ends\n", why)
	w.setWalkAll()
}

// markPoints are the roots and every mount below one: each filesystem a
// session can create entries on.
func (w *Watch) markPoints() []string {
	var out []string
	for _, r := range w.roots {
		out = append(out, r.path)
	}
	mounts, err := w.opts.Mounts, error(nil)
	if mounts == nil {
		mounts, err = mountinfo.Read()
	}
	if err != nil {
		fmt.Fprintf(w.opts.Warn, "oxsupervise: warning: read mountinfo (%v): mounts below the writable roots are checked when the session ends\n", err)
		w.walkAll = true
		return out
	}
	for _, m := range mounts {
		for _, r := range w.roots {
			if strings.HasPrefix(m.Point, r.path+"/") {
				out = append(out, m.Point)
			}
		}
	}
	return out
}

// addFS remembers a descriptor on p's filesystem, by fsid: the mount
// descriptor open_by_handle_at resolves that filesystem's handles with.
func (w *Watch) addFS(p string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", p, err)
	}
	if _, ok := w.byFSID[st.Fsid.Val]; ok {
		return nil
	}
	// Not O_PATH: open_by_handle_at refuses those as its mount_fd.
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	w.byFSID[st.Fsid.Val] = fd
	return nil
}

// loop handles the events as they come, until Close stops it (the
// eventfd wakes it; Close's own drain handles what is queued then).
func (w *Watch) loop() {
	defer close(w.done)
	defer w.events.Close()
	buf := make([]byte, 64<<10)
	var ready []int
	for {
		var err error
		if ready, err = w.events.Wait(time.Time{}, ready); err != nil {
			fmt.Fprintf(w.opts.Warn, "oxsupervise: warning: fanotify wait: %v; protected names are checked when the session ends\n", err)
			w.setWalkAll()
			return
		}
		w.handling.Lock()
		stopped := w.stopped
		if !stopped {
			w.drain(buf)
		}
		w.handling.Unlock()
		if stopped {
			return
		}
	}
}

func (w *Watch) setWalkAll() {
	w.mu.Lock()
	w.walkAll = true
	w.mu.Unlock()
}

// created handles one new entry at path made by pid.
func (w *Watch) created(path string, pid int, movedDir bool) {
	r, rel, ok := w.rootOf(path)
	if !ok {
		return
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return // gone again
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if n, p := w.c.ProtectedPrefix(rel, isDir); p != nil {
		target := filepath.Join(append([]string{r.path}, rel[:n]...)...)
		w.decide(r, target, n < len(rel) || isDir, pid, *p)
		return
	}
	if movedDir {
		// A directory renamed into place may carry protected names
		// below it that no event reports.
		if !w.walk(r, path, maxMovedDirWalk, pid, false) {
			w.setWalkAll()
		}
	}
}

// decide moves target now, or defers it to Close when git writes such
// entries for normal work.
func (w *Watch) decide(r root, target string, isDir bool, pid int, p policy.ProtectedPattern) {
	if p.CheckedAtEnd && !isDir {
		w.mu.Lock()
		w.deferredSet[target] = true
		w.mu.Unlock()
		return
	}
	w.move(r, target, pid, p, "a protected name created during the session")
}

// rootOf finds the writable root path lies below and path's components
// relative to it (the deepest root wins).
func (w *Watch) rootOf(path string) (root, []string, bool) {
	if w.ignored(path) {
		return root{}, nil, false
	}
	best := -1
	for i, r := range w.roots {
		if strings.HasPrefix(path, r.path+"/") && (best < 0 || len(r.path) > len(w.roots[best].path)) {
			best = i
		}
	}
	if best < 0 {
		return root{}, nil, false
	}
	rel := strings.TrimPrefix(path, w.roots[best].path+"/")
	return w.roots[best], strings.Split(rel, "/"), true
}

// walk looks for protected entries below dir (inclusive) and moves each
// that did not exist before the session. finalCheck also moves deferred
// kinds that fail their check. It reports false when it stopped at limit.
func (w *Watch) walk(r root, dir string, limit, pid int, finalCheck bool) bool {
	seen := 0
	complete := true
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if seen++; seen > limit {
			complete = false
			return filepath.SkipAll
		}
		if d.IsDir() && w.ignored(p) {
			return filepath.SkipDir
		}
		_, rel, ok := w.rootOf(p)
		if !ok {
			return nil
		}
		pat := w.c.ProtectedMatch(rel, d.IsDir())
		if pat == nil {
			return nil
		}
		if w.reported && !pat.CheckedAtEnd {
			// The kernel refused every other protected creation: this
			// one is the user's, and nothing below it is the session's.
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if w.preexisting(p) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if finalCheck && pat.CheckedAtEnd && !d.IsDir() {
			w.mu.Lock()
			w.deferredSet[p] = true
			w.mu.Unlock()
			return nil
		}
		w.decide(r, p, d.IsDir(), pid, *pat)
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	return complete
}

// preexisting reports whether the protected entry at p existed when the
// session started: the policy resolved it then, or its birth time is
// older than the session.
func (w *Watch) preexisting(p string) bool {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return true // gone: nothing to move
	}
	for _, a := range w.c.ProtectedPaths {
		if a.Path == p && a.Exists && (a.Ino == 0 || a.Ino == st.Ino) {
			return true
		}
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx); err == nil && stx.Mask&unix.STATX_BTIME != 0 {
		return time.Unix(stx.Btime.Sec, int64(stx.Btime.Nsec)).Before(w.start)
	}
	// No birth time: only the policy's scan can tell, when complete.
	return !w.c.ProtectedPathsComplete
}

// Close stops the watch and makes the final check; call it once every
// process of the session is gone. It returns every entry moved.
//
// It first removes the watch's marks: every event the session's processes
// caused is queued by then (fanotify queues in the syscall that made it),
// so the drain that follows handles all of them and, with no mark left,
// ends instead of chasing other processes' events on the same
// filesystems. Freeing the marks waits for the kernel's SRCU grace period
// (10-20 ms on a loaded host, issue 18), and closing the fanotify
// descriptor waits for that: the descriptor is closed behind Close's
// back, so that wait overlaps the rest of the session's end (or, in the
// daemon, nobody's) instead of lengthening it.
//
// The drain is Close's own, not the loop's: the loop sleeps in its
// wait, and waking it and waiting for it to hand back was a round trip
// through the scheduler (0.05-0.8 ms on a loaded host, at the moment the
// session's end wakes several goroutines at once). Close takes the
// handling lock instead, so it waits only for events the loop is
// handling right then, and the loop, woken, finds itself stopped.
func (w *Watch) Close() []Moved {
	if w.done != nil {
		if err := unix.FanotifyMark(w.fan, unix.FAN_MARK_FLUSH|unix.FAN_MARK_FILESYSTEM, 0, unix.AT_FDCWD, ""); err != nil {
			// The marks stay until the descriptor closes: the drain
			// still ends once the queue is empty, as before.
			fmt.Fprintf(w.opts.Warn, "oxsupervise: warning: remove the fanotify marks of the protected-name watch: %v\n", err)
		}
		unix.Write(w.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		w.handling.Lock()
		w.stopped = true
		w.drain(make([]byte, 64<<10))
		w.handling.Unlock()
	}
	deferredPaths := w.deferredPaths()
	w.mu.Lock()
	walkAll := w.walkAll
	w.mu.Unlock()
	// What each deferred entry holds, read once: the check below judges
	// what was read here unless a walk found the entries anew.
	type read struct {
		content []byte
		err     error
	}
	reads := map[string]read{}
	if w.reported && !walkAll {
		for _, p := range deferredPaths {
			content, err := w.readDeferred(p)
			if errors.Is(err, errNotThere) {
				// Its directory was renamed since (the entry itself
				// cannot be): the report no longer finds it.
				fmt.Fprintf(w.opts.Warn, "oxsupervise: warning: %s, created during the session, is gone from there: the writable roots are walked for new .git files\n", p)
				walkAll = true
				break
			}
			reads[p] = read{content, err}
		}
	}
	if walkAll {
		clear(reads)
		for _, r := range w.roots {
			if !w.walk(r, r.path, maxFinalWalk, 0, true) {
				fmt.Fprintf(w.opts.Warn, "oxsupervise: warning: stopped the final check of %s for protected names after %d entries\n", r.path, maxFinalWalk)
			}
		}
		deferredPaths = w.deferredPaths()
	}
	for _, p := range deferredPaths {
		r, rel, ok := w.rootOf(p)
		if !ok {
			continue
		}
		rd, ok := reads[p]
		if !ok {
			rd.content, rd.err = w.readDeferred(p)
		}
		content, err := rd.content, rd.err
		if errors.Is(err, errNotThere) {
			continue // moved with its directory: the walk found it there
		}
		why, bad := suspicious(w.c, p, content, err)
		if !bad {
			continue
		}
		if pat := w.c.ProtectedMatch(rel, false); pat != nil {
			w.move(r, p, 0, *pat, why)
		}
	}
	if fan, wake := w.fan, w.wake; fan >= 0 && w.done != nil {
		// The marks are gone (see above): only the kernel's release of
		// the group is left, once the loop no longer waits on the two
		// descriptors (it is woken, and stops without reading).
		w.fan, w.wake = -1, -1
		go func() {
			<-w.done
			unix.Close(fan)
			unix.Close(wake)
		}()
	}
	w.closeFDs()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Moved(nil), w.moved...)
}

func (w *Watch) deferredPaths() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.deferredSet))
	for p := range w.deferredSet {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (w *Watch) closeFDs() {
	for _, r := range w.roots {
		unix.Close(r.fd)
	}
	for _, fd := range w.byFSID {
		unix.Close(fd)
	}
	for _, fd := range []int{w.fan, w.wake} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	w.roots, w.byFSID, w.fan, w.wake = nil, nil, -1, -1
}

// ignored reports whether p is, or lies below, an Options.Ignore directory.
func (w *Watch) ignored(p string) bool {
	for _, d := range w.opts.Ignore {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
