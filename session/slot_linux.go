//go:build linux

package session

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
)

// Slot is a session started ahead of its request, for a long-lived
// supervisor (the daemon) that keeps one ready: its cgroup exists under
// the supervisor's parent, its session ID chosen, and its launcher was
// started straight into it (CLONE_INTO_CGROUP, the usual clone flags, the
// parent-death signal of an OS thread locked for the slot's and then the
// session's life) and waits for its spec. The launcher was handed nothing
// that depends on the session: the spec brings the command's stdio and the
// private /dev/shm (launcher.SendSpec), the session's limits are written
// when Run claims the slot, and the layers are applied then as for a
// fresh start.
//
// The signals a session forwards to its command are registered with the
// slot, off the request path (so a supervisor with a slot waiting does
// not die of SIGHUP, SIGUSR1 or SIGUSR2: they are dropped at the claim).
// Its group is marked a slot (cgroup.NewSlot): neither cgroup.ListSessions
// nor List (`oxsupervise ps`) shows it until it is claimed, and it has no
// registry entry. The launcher dies with its supervisor (parent-death
// signal), and the next daemon removes the group a crashed one left
// (RemoveSlots).
type Slot struct {
	id    string
	group *cgroup.Group
	l     *launched
	opts  SlotOptions
	// over is closed once the launcher is gone (launched.release): the
	// thread that forked it may then be unlocked.
	over     chan struct{}
	overOnce sync.Once
}

// SlotOptions say what a slot is made for; a request that differs is not
// served by it (Slot.Serves).
type SlotOptions struct {
	Cgroup   cgroup.Config
	Registry Registry
	// SelfExe is RunOptions.SelfExe of the sessions it serves.
	SelfExe string
	// NetNS starts the launcher in a new, empty network namespace
	// (Plan.NetNS).
	NetNS bool
	// KeepSignals makes the signals that came while the slot waited its
	// session's, for a slot made by a process that runs this one session
	// (SlotAhead): one that ends a process (SIGTERM, SIGINT, SIGHUP,
	// SIGQUIT) ends the run at the claim, before anything of it runs
	// (Run returns an ExecError with 128+N), and the others are
	// forwarded once the command runs. A daemon's slot drops them: they
	// were not the session's.
	KeepSignals bool
}

// NewSlot creates a session slot: the group and its launcher, waiting for
// a spec. Close it unless Run claims it.
func NewSlot(o SlotOptions) (*Slot, error) {
	id, err := NewID()
	if err != nil {
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	// The signals its session will forward, registered now: the
	// registration (a round trip to the runtime's signal thread per
	// signal no channel has yet) is off the request path, and while a
	// slot waits the session ending before it does not pay for the
	// deregistration either. Before the group exists: a SIGHUP or SIGQUIT
	// that kills the process after the mkdir would leave the group.
	sigs := notifySessionSignals()
	group, err := cgroup.NewSlot(o.Cgroup, id)
	if err != nil {
		signal.Stop(sigs)
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	s := &Slot{id: id, group: group, opts: o, over: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The launcher's parent-death signal is this thread's: it stays
		// locked, and so alive, until the launcher is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		l, err := forkLauncher(o.SelfExe, group, o.NetNS)
		s.l = l
		started <- err
		if err == nil {
			<-s.over
		}
	}()
	if err := <-started; err != nil {
		signal.Stop(sigs)
		cleanupSession(group, o.Registry, id, io.Discard)
		return nil, err
	}
	s.l.sigs = sigs
	s.l.unlock = func() { s.overOnce.Do(func() { close(s.over) }) }
	return s, nil
}

// ID is the session ID the slot's session will have.
func (s *Slot) ID() string { return s.id }

// Serves says why the slot cannot serve a session of opts whose plan asks
// for a network namespace or not (netns); "" when it can. A launcher that
// no longer waits for its spec (killed, or failed) serves nothing.
func (s *Slot) Serves(opts RunOptions, netns bool) string {
	switch {
	case netns != s.opts.NetNS && netns:
		return "the session needs a private network namespace, the slot has none"
	case netns != s.opts.NetNS:
		return "the slot has a private network namespace, the session none"
	case opts.SelfExe != s.opts.SelfExe:
		return "the session has another launcher"
	case opts.Cgroup != s.opts.Cgroup:
		return "the session's cgroup parent is another"
	case opts.Registry != s.opts.Registry:
		return "the session's registry is another"
	case !s.l.waiting():
		return "the slot's launcher no longer waits for its spec"
	}
	return ""
}

// Close ends a slot no session claimed: its launcher (which ran nothing)
// is killed and its group removed.
func (s *Slot) Close() {
	s.l.abort()
	cleanupSession(s.group, s.opts.Registry, s.id, io.Discard)
}

// termination returns the first signal that ends a process (SIGTERM,
// SIGINT, SIGHUP, SIGQUIT) among those that came while the slot waited, or
// nil. Every signal stays queued, in its order, for the next look and the
// session's relay.
func (s *Slot) termination() os.Signal {
	var queued []os.Signal
	for len(s.l.sigs) > 0 {
		queued = append(queued, <-s.l.sigs)
	}
	var first os.Signal
	for _, sig := range queued {
		switch sig {
		case unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT:
			if first == nil {
				first = sig
			}
		}
		select {
		case s.l.sigs <- sig:
		default:
		}
	}
	return first
}

// RemoveSlots removes the slot groups under cfg's parent that no
// supervisor is using: for a daemon's start, before it makes its own. A
// slot in use holds its launcher, which dies with its supervisor
// (parent-death signal): a slot with a process in it is a live
// supervisor's (a standalone run's, made at its start, or another
// daemon's) and is left alone, never killed: its supervisor may be
// claiming it for a session this moment. An empty one is removed
// (Group.RemoveIfEmpty).
func RemoveSlots(cfg cgroup.Config) ([]string, error) {
	ids, err := cgroup.ListSlots(cfg)
	var removed []string
	for _, id := range ids {
		g, oerr := cgroup.OpenSession(cfg, id)
		ok := false
		if oerr == nil {
			ok, oerr = g.RemoveIfEmpty()
		}
		if oerr != nil {
			err = errors.Join(err, oerr)
			continue
		}
		if ok {
			removed = append(removed, id)
		}
	}
	return removed, err
}

// claim is Run's start of a session's group and launcher through a
// claimed slot: the group becomes a session's (listed) and gets the
// session's limits. The slot is the session's from here: Run's end
// removes its group like any other.
func (s *Slot) claim(limits cgroup.Limits) (string, *cgroup.Group, *launched, error) {
	// Signals that came while the slot waited were not its session's,
	// unless the slot was made for it alone: then one that ends a
	// process ends the run here, before anything of it runs (the
	// launcher, in the terminal's foreground group, may have died of a
	// Ctrl-C already), and the others are forwarded once it runs.
	if s.opts.KeepSignals {
		if sig := s.termination(); sig != nil {
			return "", nil, nil, &ExecError{Code: 128 + int(sig.(syscall.Signal)), Err: fmt.Errorf("%v before the command started: nothing ran", sig)}
		}
	} else {
		for len(s.l.sigs) > 0 {
			<-s.l.sigs
		}
	}
	if err := s.group.MarkClaimed(); err != nil {
		return "", nil, nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	if err := s.group.SetLimits(limits); err != nil {
		return "", nil, nil, &BoundaryError{Layer: LayerCgroup, Err: fmt.Errorf("session %s: %w", s.id, err)}
	}
	return s.id, s.group, s.l, nil
}

// startSession creates a session's group, with limits, and starts its
// launcher in it (netns: in a new network namespace): a claimed slot's
// when opts.Slots has one that serves the session, else new ones (the
// timing says which, and why). The launcher waits for its spec, which Run
// sends at once: its mount namespace is built while the rest of the
// session's set-up is done, and it execs nothing before its exec gate
// opens, once that set-up is in place.
func startSession(opts RunOptions, netns bool, limits cgroup.Limits) (string, *cgroup.Group, *launched, error) {
	tm := opts.Timing
	if opts.Slots != nil {
		sl, why := opts.Slots.Claim(opts, netns)
		if sl != nil {
			id, group, l, err := sl.claim(limits)
			if err != nil {
				sl.Close()
				return "", nil, nil, err
			}
			tm.Mark("slot claimed: cgroup, limits written")
			// Ahead of the request: nothing left to wait for.
			tm.Mark("launcher started")
			return id, group, l, nil
		}
		tm.Mark("no slot (" + why + "): normal start")
	}
	id, err := NewID()
	if err != nil {
		return "", nil, nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	group, err := cgroup.NewSession(opts.Cgroup, id, limits)
	if err != nil {
		return "", nil, nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	tm.Mark("cgroup created")
	l, err := startLauncher(opts, group, netns)
	if err != nil {
		cleanupSession(group, opts.Registry, id, warnOrDiscard(opts.Warn))
		return "", nil, nil, err
	}
	tm.Mark("launcher started")
	return id, group, l, nil
}
