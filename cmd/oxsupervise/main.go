// Command oxsupervise puts AI coding agent sessions into a boundary the
// kernel enforces. Each verb lives in its own file (verb_*.go); this file
// only dispatches and defines the exit codes every verb shares.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/openoxide/oxsupervise/daemon"
)

// Exit codes shared by every verb (documented in README). Those a request
// to the daemon can end in are the daemon package's, which maps its
// answers to them (daemon.ExitCode).
const (
	exitOK         = 0
	exitFail       = daemon.ExitFail       // the verb ran and failed (or: policy check says deny)
	exitUsage      = daemon.ExitUsage      // bad flags or arguments
	exitAsk        = 3                     // policy check: the decision is "ask"
	exitNoBoundary = daemon.ExitNoBoundary // run/attach: the boundary could not be built; nothing ran
)

// streams are the standard streams a verb uses, so tests can capture them.
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

type verb struct {
	summary string
	run     func(ctx context.Context, s streams, args []string) int
}

func verbs() map[string]verb {
	return map[string]verb{
		"run":       {"run a command inside a new confined session", cmdRun},
		"agents":    {"list the built-in agent profiles and what each grants", cmdAgents},
		"attach":    {"confine a running process and all its descendants", cmdAttach},
		"sessions":  {"list sessions", cmdSessions},
		"stop":      {"stop a session and kill every process in it", cmdStop},
		"audit":     {"read the audit log (audit tail)", cmdAudit},
		"policy":    {"show the effective policy or check a tool call (policy show|check)", cmdPolicy},
		"doctor":    {"report which enforcement layers this machine supports", cmdDoctor},
		"daemon":    {"run the supervisor daemon", cmdDaemon},
		"approvals": {"list pending approval requests", cmdApprovals},
		"approve":   {"answer an approval request", cmdApprove},
		"exec":      {"inside a session: run a command outside it after approval", cmdExec},
		"version":   {"print the version", cmdVersion},
		"hook":      {"an agent's PreToolUse hook: judge a tool call, nest shell commands (hook claude-code|codex)", cmdHook},
		"agent":     {"install the hook into an agent's settings (agent setup claude-code|codex)", cmdAgent},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: oxsupervise VERB [flags] [-- CMD ARG...]")
	fmt.Fprintln(w, "\nverbs:")
	all := verbs()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, all[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'oxsupervise VERB --help' for a verb's flags.")
}

// Every start pays for what this program links and how (standalone runs,
// the daemon's clients, the nested inner CLI; TestCLILinksNoExporters
// keeps the daemon's exporters out). Three choices were measured and kept:
//   - No //go:debug containermaxprocs=0 or updatemaxprocs=0: the Go 1.26
//     runtime reads /proc/self/cgroup, mountinfo and the CPU quota at start
//     either way (with the first set, to count a metric), and the second
//     only stops a re-read once a second; the cgroup-aware GOMAXPROCS stays.
//   - No cgo (the Makefile's STATIC): the dynamic loader and libc's start
//     cost each start ~1.9 ms of wall and CPU and ~70 page faults
//     (`version` 6.7 -> 4.8 ms, 400 -> 268 syscalls; `run -- true` ~1.8 ms
//     of CPU). Users only NSS knows (LDAP, SSSD, systemd) are still found:
//     internal/account asks glibc's getent for what /etc/passwd and
//     /etc/group do not answer; a sudo or --user run where the group
//     database is more than files pays one getent run (~0.5 ms) of the
//     gain back (TestCLILooksUpUsersThroughAccount keeps
//     other lookups out); the net package's cgo resolver is never needed
//     (the DNS this program does goes to resolv.conf's servers itself).
//   - package cgroup builds on containerd/cgroups/v3 (the design's choice),
//     whose cgroup2 package links protobuf, godbus and go-systemd: their
//     initialization is ~0.5 ms of each start (18 of 147 package inits).
func main() {
	os.Exit(dispatch(os.Args[1:], streams{os.Stdin, os.Stdout, os.Stderr}))
}

func dispatch(args []string, s streams) int {
	if len(args) == 0 {
		usage(s.err)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(s.out)
		return exitOK
	}
	v, ok := verbs()[args[0]]
	if !ok {
		fmt.Fprintf(s.err, "oxsupervise: unknown verb %q\n", args[0])
		usage(s.err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return v.run(ctx, s, args[1:])
}
