package agenthook

import "strings"

// TierFlag is the flag of `oxsupervise run` that selects the agent's
// command tier for a nested session (docs/agents-tiers.md).
const TierFlag = "--tier=command"

// NestedCommand is the shell command line that runs command in a nested
// session with agent's command tier:
//
//	'EXE' run --tier=command --agent=AGENT -- bash -c 'COMMAND'
//
// Every word is single-quoted, so the agent's shell passes the original
// command to the inner bash byte for byte, whatever it holds (quotes,
// newlines, $(...), backticks, globs, NUL-free binary). There is no exec:
// agents append their own bookkeeping after the command (Claude Code
// records the working directory), and it must still run.
func NestedCommand(exe string, agent Agent, command string) string {
	return strings.Join([]string{
		ShellQuote(exe), "run", TierFlag, "--agent=" + ShellQuote(string(agent)), "--", "bash", "-c", ShellQuote(command),
	}, " ")
}

// ShellQuote quotes s as one word for a POSIX shell: inside single quotes
// nothing is special except the single quote itself, which is closed,
// escaped and reopened.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
