package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/agenthook"
	"github.com/openoxide/oxsupervise/policy"
)

// exitHookBlock is the status both agents read as "block this tool call,
// the reason is on stderr" (Claude Code and Codex PreToolUse hooks): the
// hook's answer when it cannot judge (bad input, no policy). Never an
// allow for what could not be judged.
const exitHookBlock = 2

// nestedRunReady turns on the rewrite of shell commands into
// `run --tier=command` (docs/agents-tiers.md). `run` inside a session is
// a nested-session client of the supervisor of that session (the
// standalone run or the daemon, host.RunNesting). --no-nest judges only.
const nestedRunReady = true

// cmdHook implements `oxsupervise hook claude-code|codex`: an agent's
// PreToolUse hook (package agenthook). It reads the hook input on stdin,
// judges the call with the permission rules of the same layers as
// `policy check`, and answers on stdout in the agent's format; inside a
// session it rewrites shell commands to run in a nested session with the
// agent's command tier.
func cmdHook(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("hook", pflag.ContinueOnError)
	noNest := fs.Bool("no-nest", false, "judge only: never rewrite shell commands into a nested session")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise hook claude-code|codex [--no-nest]  (reads the agent's PreToolUse JSON on stdin)")
		fmt.Fprintln(fs.Output(), "Installed by `oxsupervise agent setup AGENT`; exit 0 with the answer on stdout, 2 to block with the reason on stderr.")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "hook", args); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(s.err, "oxsupervise hook: name one agent: claude-code or codex")
		return exitUsage
	}
	agent, err := agenthook.ParseAgent(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise hook: %v\n", err)
		return exitUsage
	}
	in, err := agenthook.Parse(s.in)
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise hook %s: blocked: %v\n", agent, err)
		return exitHookBlock
	}
	// The permission rules are the resolve step's: no path is looked at
	// on this per-tool-call path.
	r, _, err := policy.Resolve(policyOptions(nil, s.err))
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise hook %s: blocked: the policy could not be loaded: %v\n", agent, err)
		return exitHookBlock
	}
	opts := agenthook.Options{Agent: agent, Nest: nestedRunReady && !*noNest && hookInSession()}
	if opts.Nest {
		if opts.Exe, err = selfExecutable(); err != nil {
			fmt.Fprintf(s.err, "oxsupervise hook %s: blocked: %v\n", agent, err)
			return exitHookBlock
		}
	}
	a, err := agenthook.Judge(in, &r.Permissions, opts)
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise hook %s: blocked: %v\n", agent, err)
		return exitHookBlock
	}
	if len(a.Stdout) > 0 {
		if _, err := fmt.Fprintf(s.out, "%s\n", a.Stdout); err != nil {
			return exitHookBlock
		}
	}
	return exitOK
}

// selfExecutable is the absolute, symlink-resolved path of this binary,
// for the commands the hook and its set-up write.
func selfExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find the oxsupervise executable: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	if !filepath.IsAbs(exe) {
		return "", errors.New("the oxsupervise executable path is not absolute: " + exe)
	}
	return exe, nil
}
