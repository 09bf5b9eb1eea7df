//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/agenthook"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/host"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/launcher"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// nestDirEnv moves the sockets of standalone runs' nested-session servers
// (host.DefaultNestDir); tests point it at a directory of their own.
const nestDirEnv = "OXSUPERVISE_NEST_DIR"

// inSession reports whether this process is inside a session: its cgroup
// lies below a session group. OXSUPERVISE_SESSION alone is only a hint
// (anyone can set it); without the cgroup it is a run like any other.
func inSession() (bool, error) {
	chain, err := cgroup.SessionChain(cgroup.Config{}, os.Getpid())
	if errors.Is(err, cgroup.ErrNoCgroup2) {
		return false, nil // no cgroup2, no session (and no run: its boundary says so)
	}
	if err != nil {
		return false, fmt.Errorf("cannot tell whether this run is inside a session: %w", err)
	}
	if len(chain) > 0 {
		return true, nil
	}
	// A daemon may keep its sessions below another parent group: the
	// variable names the session, and the kernel confirms it when this
	// process's cgroup has a group of that name.
	if id := os.Getenv(session.SessionEnv); id != "" {
		if path, err := cgroup.CgroupOf(os.Getpid()); err == nil && slices.Contains(strings.Split(path, "/"), id) {
			return true, nil
		}
	}
	return false, nil
}

// runNested is `run` inside a session: the supervisor of the session
// (host.RunNesting) builds the nested session and moves the launcher this
// process started into it; the launcher stacks the child's Landlock domain
// on the parent's, and this process waits for the command and prints the
// child's refusals on stderr (what an agent's model reads in the tool
// result).
func runNested(ctx context.Context, s streams, r runRequest, in bool, inErr error) int {
	fail := func(format string, args ...any) int { return nestedNotBuilt(s, format, args...) }
	switch {
	case inErr != nil:
		return fail("%v", inErr)
	case !in:
		fmt.Fprintln(s.err, "oxsupervise run: --tier is for a run inside a session (the agent's commands); this process is in none")
		return exitUsage
	case r.user != "":
		fmt.Fprintln(s.err, "oxsupervise run: --user cannot be used inside a session: a nested session runs as its parent's user")
		return exitUsage
	}
	sock := os.Getenv(host.NestEnv)
	if sock == "" {
		return fail("no supervisor serves this session (%s is not set: the session was not started by this version's run or daemon)", host.NestEnv)
	}
	tm := phasetime.FromEnv(os.Getenv(phasetime.Env), s.err)
	wd, err := os.Getwd()
	if err != nil {
		return fail("current directory: %v", err)
	}
	// Connected first: the supervisor authorizes the connection (the
	// kernel's word on this process) while the launcher starts.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return fail("supervisor socket: %v", err)
	}
	defer conn.Close()
	req := host.NestRequest{Argv: r.argv, Dir: wd, Env: os.Environ(), PolicyArgs: r.policyArgs, Tier: r.tier, Agent: r.flags.Agent}
	// The first encode in this process (encoding/json's type caches, its
	// code paged in: ~0.2 ms) runs on a copy while the launcher forks.
	go func(r host.NestRequest) { _, _ = json.Marshal(r) }(req)
	// The launcher starts before the request, which names it: its start
	// overlaps the supervisor's work, which ends by moving it into the
	// child's group.
	l, err := session.StartNestedLauncher(os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		return fail("%v", err)
	}
	tm.Mark("nested run: launcher started")
	return askNested(ctx, s, conn, l, req, tm)
}

// nestedNotBuilt reports that no nested session was built.
func nestedNotBuilt(s streams, format string, args ...any) int {
	fmt.Fprintf(s.err, "oxsupervise run: nested session not built: "+format+"; nothing ran\n", args...)
	return exitNoBoundary
}

// askNested asks the supervisor on conn for the nested session req
// describes, whose command l (a launcher waiting for its spec, named by
// req) launches, runs it and reports its refusals: the nested run's
// exit status. l ends here.
func askNested(ctx context.Context, s streams, conn net.Conn, l *session.NestedLauncher, req host.NestRequest, tm *phasetime.Recorder) int {
	fail := func(format string, args ...any) int { return nestedNotBuilt(s, format, args...) }
	enc, dec := json.NewEncoder(conn), json.NewDecoder(conn)
	req.Launcher, req.ExecGate = l.Pid(), true
	if err := enc.Encode(req); err != nil {
		l.Abort()
		return fail("send the request: %v", err)
	}
	tm.Mark("nested run: request sent")
	refused := func(a host.NestAnswer) int {
		l.Abort()
		if a.Error == "" {
			a.Error = "the answer has no launch spec"
		}
		fmt.Fprintf(s.err, "oxsupervise run: nested session refused: %s\nnothing ran\n", a.Error)
		if a.Code == 0 {
			return exitNoBoundary
		}
		return a.Code
	}
	// First the spec, while the supervisor moves the launcher into the
	// child's group: the launcher sets itself up during the move and
	// waits at its exec gate.
	var a host.NestAnswer
	if err := dec.Decode(&a); err != nil {
		l.Abort()
		return fail("the supervisor did not answer: %v", err)
	}
	tm.Mark("nested run: spec answered")
	if a.Error != "" || a.Spec == nil {
		return refused(a)
	}
	spec, err := launcher.DecodeSpec(a.Spec)
	if err != nil {
		l.Abort()
		return fail("the supervisor's launch spec: %v", err)
	}
	if err := l.Send(spec); err != nil {
		l.Abort()
		return fail("%v", err)
	}
	tm.Mark("nested run: spec sent")
	for _, w := range a.Warnings {
		fmt.Fprintf(s.err, "oxsupervise: warning: %s\n", strings.TrimSpace(w))
	}
	// Then the verdict: only an admission (the launcher verified in the
	// child's group, session_start written) opens the gate; anything
	// else kills the launcher, which ran nothing.
	var v host.NestAnswer
	if err := dec.Decode(&v); err != nil {
		l.Abort()
		return fail("the supervisor did not admit the launcher: %v", err)
	}
	tm.Mark("nested run: admitted")
	if !v.Admitted {
		if v.Error == "" {
			v.Error = "the supervisor did not admit the launcher"
		}
		return refused(v)
	}
	// The final answer, or the supervisor's end: without a supervisor
	// the child's rules may lose their owner, so its command goes too.
	var ended atomic.Bool
	final := make(chan host.NestAnswer, 1)
	go func() {
		var f host.NestAnswer
		if err := dec.Decode(&f); err != nil {
			if !ended.Load() {
				l.Kill()
			}
			close(final)
			return
		}
		final <- f
	}()
	code, err := l.Run(ctx)
	ended.Store(true)
	tm.Mark("nested run: command exited")
	if err != nil {
		f := session.FailureOf(err)
		fmt.Fprintf(s.err, "oxsupervise run: %s\n", f.Message)
		code = f.Code
	}
	if err := enc.Encode(host.NestReport{Exit: &code}); err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: nested session %s: the supervisor went away: %v\n", a.Session, err)
		return code
	}
	f, ok := <-final
	tm.Mark("nested run: session ended")
	if !ok {
		fmt.Fprintf(s.err, "oxsupervise run: nested session %s: the supervisor went away before it ended the session\n", a.Session)
		if code == 0 {
			code = exitNoBoundary
		}
		return code
	}
	for _, l := range agenthook.RefusalSummary(f.Records, a.Session) {
		fmt.Fprintln(s.err, l)
	}
	return code
}

// nestRequest compiles what a nested run asks for, for the supervisor of
// its session (host.NestOptions.Request): its policy flags through the
// same layers as the session's own (as t), or the parent's policy when it
// gave none, then its tier (policy.TierRequest).
func nestRequest(t *target) func(parent *policy.Compiled, req host.NestRequest) (*policy.Compiled, []string, error) {
	return func(parent *policy.Compiled, req host.NestRequest) (*policy.Compiled, []string, error) {
		var warnings []string
		request := parent
		if len(req.PolicyArgs) > 0 {
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			pf := policy.RegisterFlags(fs)
			if err := fs.Parse(req.PolicyArgs); err != nil {
				return nil, nil, err
			}
			if pf.Workspace == "" {
				pf.Workspace = req.Dir
			}
			var buf bytes.Buffer
			c, err := loadPolicy(streams{err: &buf}, pf, t, req.Argv)
			warnings = append(warnings, lines(buf.String())...)
			if err != nil {
				return nil, warnings, err
			}
			request = c
		}
		request, w, err := policy.TierRequest(parent, request, req.Tier, req.Agent)
		warnings = append(warnings, w...)
		if err != nil {
			return nil, warnings, err
		}
		return request, warnings, nil
	}
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(strings.TrimPrefix(l, "oxsupervise: warning:")); l != "" {
			out = append(out, l)
		}
	}
	return out
}
