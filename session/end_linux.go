//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/phasetime"
)

// A session's end has two halves. Settling it is what its exit status
// waits for: every process of the session gone, every layer's reports and
// the kernel audit feed drained, the final check of names done, the group
// and the registry entry removed (List no longer shows the session) and
// session_stop written. From then on the audit log holds every record of
// the session, so whoever is told it ended (Run's return, the daemon's
// final event, a nested run's answer) finds all of them there.
// Releasing it frees what only this process still holds for it (the
// launcher's signal relay, the kernel audit feed, the audit sink) and
// waits for session_stop's sync to the disk, which the sink started
// behind the write: nothing anyone is told the end at waits for, so a
// long-lived supervisor does it after answering (RunOptions.Settled),
// and one that exits right after (RunOptions.ExitAfter) leaves the
// signal relay to its exit and the sink's close to the end of its own
// (RunOptions.BeforeExit), still before it exits.
//
// The layers' teardowns are settling, not releasing: what they cost is
// the drain of their programs' reports (a round trip to the ring's
// reader); dropping the session's map entries is a few system calls, and
// the one slow part of any detach (the read-only view's program leaving
// the system call exit path, ~1 ms) runs in the background already.

// runEnd is what Run's session ends with once its command has exited.
type runEnd struct {
	id     string
	group  *cgroup.Group
	reg    Registry
	aud    *auditor
	entry  *Entry
	mode   string
	names  *nameWatch
	create *nameWatch
	guard  *agentGuard
	// undoEarly and undoGated undo the layers applied before the launch
	// and at the exec gate: each drains the reports of its programs, then
	// drops the session's rules.
	undoEarly, undoGated func(context.Context)
	// released releases what was attached ahead for a gate the session
	// may never have reached (attachAhead).
	released func()
	// launcher is the session's launcher, whose signal relay and thread
	// lock outlive the command until release.
	launcher *launched
	// exitAfter is RunOptions.ExitAfter, beforeExit RunOptions.BeforeExit.
	exitAfter  bool
	beforeExit *sync.WaitGroup
	tm         *phasetime.Recorder
	warn       io.Writer
}

// settle settles the session that ended with code (or err).
func (e *runEnd) settle(code int, err error) {
	tm := e.tm
	removed, emptied := endSession(e.group, e.reg, e.id)
	tm.Mark("cgroup killed")
	if emptied {
		// Every process of the session is gone, so every refusal it made
		// is queued in the kernel: the kernel audit drain starts now and
		// runs while the rest settles (aud.settle waits for it).
		e.aud.endKernelAudit()
	}
	// Nothing of the session runs any more: the layers applied at the
	// exec gate and those applied before it are undone side by side, and
	// beside the final check of names (each drains the reports of its
	// programs first, and they share nothing else).
	tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gatedUndone, earlyUndone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(gatedUndone)
		e.undoGated(tctx)
	}()
	go func() {
		defer close(earlyUndone)
		e.undoEarly(tctx)
	}()
	e.names.close()
	tm.Mark("final check of names")
	<-gatedUndone
	<-earlyUndone
	// What was attached ahead for a session that never reached its gate
	// (a detach, but here rather than in release: a program left attached
	// past the answer would be detached under the caller's next session,
	// which attached nothing ahead because it found it attached).
	e.released()
	tm.Mark("layers undone")
	// The layers have handed over every report: the check of the entries
	// they let the session create.
	e.create.close()
	e.guard.finish(e.aud, e.id, e.mode, e.warn)
	removed(e.warn)
	tm.Mark("cgroup and registry entry removed")
	e.aud.settle(stopRecord(e.entry, code, err))
	tm.Mark("audit closed")
}

// release releases the settled session.
func (e *runEnd) release() {
	if !e.exitAfter {
		// signal.Stop: a round trip to the runtime's signal-mask thread
		// for each signal the relay took (0.1-0.2 ms each on a loaded
		// machine). A process that exits now leaves that to its exit.
		e.launcher.release()
	}
	if e.beforeExit != nil {
		e.beforeExit.Add(1)
		go func() {
			defer e.beforeExit.Done()
			e.aud.close()
		}()
	} else {
		e.aud.close()
	}
	e.tm.Mark("session released")
}

// cleanupSession kills every process left in the group (setsid and double
// forks included), removes the group and the registry entry.
func cleanupSession(group *cgroup.Group, reg Registry, id string, warn io.Writer) {
	removed, _ := endSession(group, reg, id)
	removed(warn)
}

// endSession kills every process left in the group (setsid and double
// forks included) and returns once the group is empty (emptied; false
// when the kill failed). Removing the group and the registry entry (a
// journalled unlink on most hosts) goes on meanwhile, alongside the rest
// of the session's end; removed waits for it and says on warn what failed.
func endSession(group *cgroup.Group, reg Registry, id string) (removed func(warn io.Writer), emptied bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	var errs []error
	if _, err := os.Stat(group.Path); errors.Is(err, fs.ErrNotExist) {
		// `oxsupervise stop` got there first.
		cancel()
		reg.Delete(id)
		return func(io.Writer) {}, true
	}
	emptied = true
	if err := group.Kill(ctx); err != nil {
		errs = append(errs, err)
		emptied = false
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		if err := group.Remove(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := reg.Delete(id); err != nil {
			errs = append(errs, err)
		}
	}()
	return func(warn io.Writer) {
		<-done
		for _, err := range errs {
			fmt.Fprintf(warn, "oxsupervise: session %s: %v\n", id, err)
		}
	}, emptied
}
