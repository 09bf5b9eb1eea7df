//go:build linux

package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The group's state in cgroup.events: populated and frozen, and the
// operations that change it and wait for the change (freeze, thaw, kill,
// wait until empty, remove).

// DefaultTimeout bounds Freeze, Thaw, Kill, WaitEmpty and Remove when the
// caller's context has no deadline, so a stuck kernel state surfaces as an
// error instead of a hang.
const DefaultTimeout = 10 * time.Second

// Populated reports whether any live task is in the group or below it.
func (g *Group) Populated() (bool, error) {
	v, err := g.event("populated")
	return v == 1, err
}

// Frozen reports whether the group is completely frozen.
func (g *Group) Frozen() (bool, error) {
	v, err := g.event("frozen")
	return v == 1, err
}

// Freeze stops every task in the group (cgroup.freeze, kernel 5.2+) and waits
// until cgroup.events reports "frozen 1".
func (g *Group) Freeze(ctx context.Context) error {
	if err := writeFile(filepath.Join(g.Path, "cgroup.freeze"), "1"); err != nil {
		return fmt.Errorf("freeze %s: %w", g.Path, err)
	}
	if err := g.waitEvent(ctx, "frozen", 1); err != nil {
		return fmt.Errorf("freeze %s: %w", g.Path, err)
	}
	return nil
}

// Thaw resumes the group and waits until cgroup.events reports "frozen 0".
func (g *Group) Thaw(ctx context.Context) error {
	if err := writeFile(filepath.Join(g.Path, "cgroup.freeze"), "0"); err != nil {
		return fmt.Errorf("thaw %s: %w", g.Path, err)
	}
	if err := g.waitEvent(ctx, "frozen", 0); err != nil {
		return fmt.Errorf("thaw %s: %w", g.Path, err)
	}
	return nil
}

// Kill SIGKILLs every task in the group and below it, including those that
// left the process tree (setsid, double fork), and waits until the group is
// empty. It uses cgroup.kill (kernel 5.14+, domain groups); where that file
// does not exist or the group is threaded it freezes the group, signals
// every pid, thaws, and repeats until empty.
func (g *Group) Kill(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if _, err := os.Stat(g.Path); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	// An empty group (the command and all it started have exited: the
	// usual end of a session) has nothing to kill, and nothing of it is
	// left to fork into it again.
	if populated, err := g.Populated(); err == nil && !populated {
		return nil
	}
	err := writeFile(filepath.Join(g.Path, "cgroup.kill"), "1")
	// No cgroup.kill before 5.14; threaded groups refuse it with EOPNOTSUPP.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.EOPNOTSUPP) {
		return g.killBySignal(ctx)
	}
	if err != nil {
		return fmt.Errorf("kill %s: %w", g.Path, err)
	}
	return g.WaitEmpty(ctx)
}

// killBySignal is Kill for kernels without cgroup.kill. Freezing first keeps
// a task from forking a child we would miss between listing and signalling;
// a frozen task still dies of SIGKILL once thawed.
func (g *Group) killBySignal(ctx context.Context) error {
	canFreeze := fileExists(filepath.Join(g.Path, "cgroup.freeze"))
	for {
		if canFreeze {
			if err := g.Freeze(ctx); err != nil {
				return fmt.Errorf("kill %s: %w", g.Path, err)
			}
		}
		// Threads, not procs: cgroup.procs is unreadable in threaded groups,
		// and SIGKILL sent to any thread kills its whole process.
		tids, err := g.Threads()
		if err != nil {
			return fmt.Errorf("kill %s: %w", g.Path, err)
		}
		for _, tid := range tids {
			if err := unix.Kill(tid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("kill %s: tid %d: %w", g.Path, tid, err)
			}
		}
		if canFreeze {
			if err := g.Thaw(ctx); err != nil {
				return fmt.Errorf("kill %s: %w", g.Path, err)
			}
		}
		if err := g.waitEvent(ctx, "populated", 0); err == nil {
			return nil
		} else if ctx.Err() != nil {
			return fmt.Errorf("kill %s: %w", g.Path, err)
		}
	}
}

// WaitEmpty waits until cgroup.events reports "populated 0".
func (g *Group) WaitEmpty(ctx context.Context) error {
	if err := g.waitEvent(ctx, "populated", 0); err != nil {
		return fmt.Errorf("wait for %s to empty: %w", g.Path, err)
	}
	return nil
}

// endRecheck is how often WaitEnd reads cgroup.events without having been
// woken, in case a notification is lost.
const endRecheck = time.Second

// WaitEnd waits until the group has no live task left or is removed, for
// as long as ctx allows: unlike WaitEmpty it has no default bound, since a
// session lasts as long as its processes do. It sleeps on inotify, which
// the kernel triggers on every change of cgroup.events, and reads the file
// again at least every endRecheck. Read errors other than the group's
// removal are retried (the group is still there, and so are its rules);
// when ctx ends first, WaitEnd returns ctx's error with the last of them.
func (g *Group) WaitEnd(ctx context.Context) (End, error) {
	events := filepath.Join(g.Path, "cgroup.events")
	wake, closeWake := watchModify(events)
	defer closeWake()
	var lastErr error
	for {
		populated, err := g.event("populated")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return Removed, nil
		case err == nil && populated == 0:
			return Emptied, nil
		case err != nil:
			lastErr = err
		}
		timer := time.NewTimer(endRecheck)
		select {
		case <-ctx.Done():
			timer.Stop()
			return 0, errors.Join(fmt.Errorf("wait for %s to end: %w", g.Path, ctx.Err()), lastErr)
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// watchModify delivers a value on the returned channel whenever path is
// modified or goes away; without inotify the channel never fires and the
// caller's own recheck does the work.
func watchModify(path string) (<-chan struct{}, func()) {
	wake := make(chan struct{}, 1)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return wake, func() {}
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_MODIFY|unix.IN_DELETE_SELF); err != nil {
		unix.Close(fd)
		return wake, func() {}
	}
	// A non-blocking fd joins the runtime's poller: Read parks the
	// goroutine and Close wakes it.
	f := os.NewFile(uintptr(fd), "inotify "+path)
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return wake, func() { f.Close() }
}

// Remove deletes the group and any groups below it. The group must be empty
// (Kill it first).
func (g *Group) Remove(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	populated, err := g.Populated()
	if gone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", g.Path, err)
	}
	if populated {
		return fmt.Errorf("remove %s: the group still has processes (Kill it first)", g.Path)
	}
	if err := removeTree(ctx, g.Path); err != nil {
		return fmt.Errorf("remove %s: %w", g.Path, err)
	}
	return nil
}

// RemoveIfEmpty removes the group, a leaf, with one rmdir unless a
// process is in it: the kernel refuses that rmdir (EBUSY), and the group
// is left as it is, with no wait and no error (removed false). A group
// already gone counts as removed.
func (g *Group) RemoveIfEmpty() (removed bool, err error) {
	switch err := unix.Rmdir(g.Path); {
	case err == nil || gone(err):
		return true, nil
	case errors.Is(err, unix.EBUSY):
		return false, nil
	default:
		return false, fmt.Errorf("remove %s: %w", g.Path, err)
	}
}

// removeTree removes dir and the groups below it, deepest first (a cgroup
// with child groups cannot be removed). A group below that disappears
// meanwhile is no error: a nested session removes its own group at its
// end, which may come while its parent session's end removes the tree
// (stopping the walk there would leave the parent's group behind).
func removeTree(ctx context.Context, dir string) error {
	entries, err := os.ReadDir(dir)
	if gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(ctx, filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return rmdirRetry(ctx, dir)
}

// gone reports whether err says the group was removed: ENOENT, or ENODEV
// for a file of a group removed after it was opened or looked up.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV)
}

// rmdirRetry retries EBUSY: a group whose last task just exited can stay busy
// for a moment while the kernel finishes the exit.
func rmdirRetry(ctx context.Context, dir string) error {
	for {
		err := unix.Rmdir(dir)
		if err == nil || gone(err) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("rmdir %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rmdir %s: %w (still busy: %v)", dir, err, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (g *Group) event(key string) (int, error) {
	b, err := readFile(filepath.Join(g.Path, "cgroup.events"))
	if err != nil {
		return 0, fmt.Errorf("read cgroup.events: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0, fmt.Errorf("cgroup.events %s: %w", key, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("cgroup.events of %s has no %q entry (kernel too old?)", g.Path, key)
}

// waitEvent polls cgroup.events until key has value want.
func (g *Group) waitEvent(ctx context.Context, key string, want int) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	delay := time.Millisecond
	for {
		got, err := g.event(key)
		if err != nil {
			return err
		}
		if got == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup.events %s is still %d, want %d: %w", key, got, want, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}
