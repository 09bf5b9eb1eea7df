//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/daemon"
	"github.com/openoxide/oxsupervise/doctor"
	"github.com/openoxide/oxsupervise/host"
	// The launcher is this binary re-executed by `run` with a hidden
	// verb; launchfirst intercepts it during initialization, so it never
	// reaches the verb table, help or signal handling, and does nothing
	// but build the boundary and exec.
	_ "github.com/openoxide/oxsupervise/internal/launchfirst"
	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// noStandalone is run's refusal for a user who is not root when no daemon
// listens.
func noStandalone(s streams) int {
	fmt.Fprintln(s.err, "oxsupervise run: boundary not built: standalone run needs root (run it with sudo, or start the daemon: oxsupervise daemon); nothing ran")
	return exitNoBoundary
}

// runCommand runs r.argv in a Linux session (cgroup + BPF-LSM/Landlock).
func runCommand(ctx context.Context, s streams, r runRequest) int {
	// Inside a session (the kernel's word: this process's cgroup), a run
	// is a nested session, asked of the session's supervisor.
	if in, err := inSession(); in || err != nil || r.tier != "" {
		return runNested(ctx, s, r, in, err)
	}
	// An unprivileged user goes through the daemon when it runs: it builds
	// the boundary as root, clamped by managed policy on its side.
	if os.Geteuid() != 0 {
		if r.user == "" {
			// The run connection itself tells whether a daemon listens:
			// no health check before it.
			return daemon.RunCLIOr(ctx, defaultSocket(), r.argv, r.flags, s.err, func() int { return noStandalone(s) })
		}
		switch err := daemon.Probe(defaultSocket()); {
		case err == nil:
			fmt.Fprintln(s.err, "oxsupervise run: --user needs a standalone run as root; through the daemon the command runs as you")
			return exitUsage
		case !errors.Is(err, daemon.ErrNoDaemon):
			// A daemon is there but busy or broken: say so rather than
			// fall back to a standalone run this user cannot do.
			fmt.Fprintf(s.err, "oxsupervise run: boundary not built: %v; nothing ran\n", err)
			return exitNoBoundary
		}
		return noStandalone(s)
	}
	// This process starts one launcher: os's one-time pidfd probe runs
	// now, beside the policy's resolution, not in the launcher's start.
	session.WarmLaunch()
	laxGC()
	// A supervisor whose stderr reader went away (`run ... 2>&1 | head`)
	// must still end its session: killed by SIGPIPE at its next warning or
	// timing line it would leave the session's group and registry entry
	// behind. Notified rather than ignored, the signal turns the write into
	// EPIPE, and the command still starts with SIGPIPE's default action (a
	// handler, unlike an ignored signal, does not survive exec).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	tm := phasetime.FromEnv(os.Getenv(phasetime.Env), s.err)
	// Found once for the host, the session group and the kernel audit
	// feed; where it cannot be, each of them says why. The mount table
	// it is found in is the mount plan's too (RunOptions.Mounts): read
	// once. Unread, each reads it again and says why it cannot.
	var cg cgroup.Config
	mounts, err := mountinfo.Read()
	if err == nil {
		cg, _ = cgroup.Config{}.ResolvedIn(mounts)
	} else {
		mounts = nil
		cg, _ = cgroup.Config{}.Resolved()
	}
	// The session's group and launcher are made now, on the other core,
	// while the policy is resolved and bound and the host opens
	// (session.SlotAhead); Run claims them. Made for a session without a
	// network namespace of its own, the usual plan: one whose plan asks
	// for one (network none without the cgroup network layer) closes the
	// slot and starts the normal way.
	ahead := session.MakeSlotAhead(session.SlotOptions{Cgroup: cg})
	defer ahead.Close()
	// The nested sessions' socket depends on nothing the policy or the
	// host decide: it is listened on while they are worked out.
	nestDir := os.Getenv(nestDirEnv)
	nestAhead := host.ListenNestAhead(nestDir)
	defer nestAhead.Close()
	t, res, wd, failed := prepareResolved(s, r, r.user)
	if res == nil {
		return failed
	}
	tm.Mark("policy resolved")
	// The bind step scans the writable roots for protected entries (in a
	// large workspace, one lstat per directory); the host's open needs only
	// what the resolve step decided (which programs to load), so the two
	// overlap, and the session is built only from the bound policy.
	type bound struct {
		c    *policy.Compiled
		code int
	}
	unbound := res.Unbound() // before the bind starts: nothing of res is read while it runs
	binding := make(chan bound, 1)
	go func() {
		c, code := bindPolicy(s, res)
		binding <- bound{c, code}
	}()
	unavailable := session.ParseUnavailable(os.Getenv(session.ForceUnavailableEnv))
	h := openHost(unbound, cg, unavailable, s.err, tm)
	b := <-binding
	if b.c == nil {
		closeHost(h, s.err)
		return b.code
	}
	c := b.c
	tm.Mark("policy bound")
	// What Run leaves to finish before the exit: the audit sink's close,
	// which waits for session_stop's sync while the host closes.
	var beforeExit sync.WaitGroup
	code, err := h.RunNesting(ctx, session.RunOptions{
		Policy: c, Argv: r.argv, Env: targetEnv(t), Dir: wd, Cgroup: cg, Mounts: mounts,
		UID: t.uid, GID: t.gid, Groups: t.groups,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		Warn:        s.err,
		Unavailable: unavailable,
		// Tests and administrators move the quarantine elsewhere.
		QuarantineDir: os.Getenv("OXSUPERVISE_QUARANTINE_DIR"),
		Timing:        tm,
		// The CLI exits once the session is done.
		ExitAfter:  true,
		BeforeExit: &beforeExit,
		Slots:      ahead,
	}, host.NestOptions{Dir: nestDir, Request: nestRequest(t), UID: t.uid, Ahead: nestAhead})
	// Run has removed the session: nothing is left for the layers to
	// confine, and the process exits next.
	if err := h.CloseForExit(); err != nil {
		fmt.Fprintf(s.err, "oxsupervise: %v\n", err)
	}
	tm.Mark("host closed")
	beforeExit.Wait()
	tm.Mark("audit log closed")
	if err != nil {
		f := session.FailureOf(err)
		fmt.Fprintf(s.err, "oxsupervise run: %s\n", f.Message)
		fmt.Fprint(s.err, doctor.RefusalRemedy(err))
		return f.Code
	}
	return code
}

// laxGC sets the standalone supervisor's collector to a goal of 5x the
// live heap (GOGC=400) unless the environment names one. Its start
// allocates in a burst (the policy, the tree scans' remembered
// directories) that at the default goal triggers a collection while the
// launcher starts on the other core: in a 100 000-file workspace that was
// a third of the start (bench/results/session-start.md). The live heap is
// a few MiB, so the laxer goal costs little; the soft limit bounds it.
func laxGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(256 << 20)
}
