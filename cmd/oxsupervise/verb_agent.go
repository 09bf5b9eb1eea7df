package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/agenthook"
)

// cmdAgent implements `oxsupervise agent setup claude-code|codex`: it
// installs `oxsupervise hook AGENT` as the agent's PreToolUse hook in the
// user's settings, or with --managed in the agent's managed settings for
// every user of the machine (agenthook.Install: idempotent, keeps the
// rest of the file, prints what it changed).
func cmdAgent(ctx context.Context, s streams, args []string) int {
	const usageLine = "usage: oxsupervise agent setup claude-code|codex [--managed] [--settings PATH] [--exe PATH]"
	if len(args) == 0 || args[0] != "setup" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(s.out, usageLine)
			return exitOK
		}
		fmt.Fprintln(s.err, usageLine)
		return exitUsage
	}
	fs := pflag.NewFlagSet("agent setup", pflag.ContinueOnError)
	managed := fs.Bool("managed", false, "write the agent's managed settings (every user of this machine; needs root)")
	settings := fs.String("settings", "", "settings file to edit instead of the agent's default")
	exe := fs.String("exe", "", "oxsupervise executable the hook runs (default: this one)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usageLine)
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "agent setup", args[1:]); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(s.err, "oxsupervise agent setup: name one agent: claude-code or codex")
		return exitUsage
	}
	agent, err := agenthook.ParseAgent(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise agent setup: %v\n", err)
		return exitUsage
	}
	path := *settings
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil && !*managed {
			fmt.Fprintf(s.err, "oxsupervise agent setup: %v\n", err)
			return exitFail
		}
		path = agenthook.SettingsPath(agent, *managed, home, os.Getenv)
	}
	if *exe == "" {
		if *exe, err = selfExecutable(); err != nil {
			fmt.Fprintf(s.err, "oxsupervise agent setup: %v\n", err)
			return exitFail
		}
	}
	ch, err := agenthook.Install(path, agenthook.HookCommand(*exe, agent), agent)
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise agent setup: %v\n", err)
		return exitFail
	}
	fmt.Fprintln(s.out, ch)
	if agent == agenthook.Codex && !*managed && ch.Action != "unchanged" {
		fmt.Fprintln(s.out, "note: Codex runs a new or changed user hook only after you trust it (/hooks in Codex), or with --dangerously-bypass-hook-trust; hooks installed with --managed need no review")
	}
	return exitOK
}
