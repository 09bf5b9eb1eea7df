package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/daemon"
	"github.com/openoxide/oxsupervise/doctor"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

func cmdAttach(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("attach", pflag.ContinueOnError)
	fs.SetOutput(s.err)
	pf := policy.RegisterFlags(fs)
	pid := fs.Int("pid", 0, "process to confine, with all its descendants")
	allowOther := fs.Bool("allow-other-user", false, "as root: confine a process that belongs to another user")
	networkOnly := fs.Bool(strings.TrimPrefix(planner.NetworkOnlyFlag, "--"), false,
		"without BPF-LSM: confine the process with the policy's network rules and cgroup containment only, its filesystem rules NOT enforced (otherwise attach refuses, exit 125)")
	socket := fs.String("socket", defaultSocket(), "daemon socket (used when the caller is not root and the daemon answers)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise attach --pid N [policy flags] [--network-only] [--allow-other-user] [--socket PATH]")
		fmt.Fprintln(fs.Output(), "\nAs root, attach holds the session in the foreground until its last process exits.\nOtherwise the daemon attaches a process of yours, keeps the session, and attach prints its id and returns.")
		fmt.Fprintln(fs.Output(), "\nA running process can only be held to filesystem rules by BPF-LSM (see oxsupervise doctor). Without it,\nattach refuses a policy with filesystem rules (exit 125, nothing moved) unless --network-only accepts\nthe weaker boundary; external-sandbox and full-access have no filesystem rules and attach as they are.")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "attach", args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.err, "oxsupervise attach: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if !fs.Changed("pid") {
		fmt.Fprintln(s.err, "oxsupervise attach: --pid is required")
		return exitUsage
	}
	if *pid <= 0 {
		fmt.Fprintf(s.err, "oxsupervise attach: --pid %d is not a process id\n", *pid)
		return exitUsage
	}
	if useDaemon(*socket) {
		return attachThroughDaemon(ctx, s, *socket, *pid, pf, *allowOther, *networkOnly)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(s.err, "oxsupervise attach: boundary not built: standalone attach needs root (run it with sudo, or start the daemon: oxsupervise daemon)")
		return exitNoBoundary
	}
	caller := os.Getuid()
	if v := os.Getenv("SUDO_UID"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			fmt.Fprintf(s.err, "oxsupervise attach: SUDO_UID=%q is not a uid\n", v)
			return exitUsage
		}
		caller = n
	}
	t, err := resolveTarget(strconv.Itoa(caller))
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise attach: %v\n", err)
		return exitUsage
	}
	c, err := loadPolicy(s, pf, t, nil)
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise attach: policy: %v\n", err)
		return exitUsage
	}
	unavailable := session.ParseUnavailable(os.Getenv(session.ForceUnavailableEnv))
	return attachStandalone(ctx, s, session.AttachOptions{
		PID: *pid, Policy: c, CallerUID: caller, AllowOtherUser: *allowOther, NetworkOnly: *networkOnly,
		Warn:        s.err,
		Unavailable: unavailable,
	})
}

// reportAttach prints the outcome of a standalone attach of pid and
// returns its exit code.
func reportAttach(s streams, pid int, e *session.Entry, err error) int {
	var be *session.BoundaryError
	switch {
	case errors.As(err, &be):
		fmt.Fprintf(s.err, "oxsupervise attach: pid %d: boundary not built: %v; nothing was moved\n", pid, be)
		fmt.Fprint(s.err, doctor.RefusalRemedy(err))
		return exitNoBoundary
	case err != nil:
		fmt.Fprintf(s.err, "oxsupervise attach: %v\n", err)
		return exitFail
	}
	fmt.Fprintln(s.out, e.ID)
	return exitOK
}

// attachThroughDaemon asks the daemon to confine pid, one of the caller's
// processes; the daemon keeps the session after the request.
func attachThroughDaemon(ctx context.Context, s streams, socket string, pid int, pf *policy.Flags, allowOther, networkOnly bool) int {
	if allowOther {
		fmt.Fprintln(s.err, "oxsupervise attach: --allow-other-user needs a standalone attach as root; through the daemon you attach your own processes")
		return exitUsage
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise attach: current directory: %v\n", err)
		return exitFail
	}
	req, err := daemon.RequestFlags(pf, cwd)
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise attach: %v\n", err)
		return exitUsage
	}
	res, err := (&daemon.Client{Socket: socket}).Attach(ctx, daemon.AttachRequest{PID: pid, Dir: cwd, Policy: req, NetworkOnly: networkOnly})
	if err != nil {
		code := daemon.ExitCode(err, exitFail)
		if code == exitNoBoundary {
			fmt.Fprintf(s.err, "oxsupervise attach: %v\n", err)
		} else {
			fmt.Fprintf(s.err, "oxsupervise attach: %v; nothing was moved\n", err)
		}
		return code
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(s.err, w)
	}
	fmt.Fprintln(s.out, res.Session.ID)
	return exitOK
}
