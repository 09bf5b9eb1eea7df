package main

import (
	"context"

	"github.com/openoxide/oxsupervise/daemon"
)

// socketEnv overrides the daemon socket for every client verb (tests, and
// sessions whose daemon listens elsewhere).
const socketEnv = daemon.SocketEnv

func defaultSocket() string { return daemon.EnvSocket() }

// cmdDaemon is `oxsupervise daemon`: the daemon is its own program
// (companion.Daemon, cmd/oxsupervised), so that this binary, which every
// client request and standalone session starts, does not link its
// exporters. The command line is checked here first with the daemon's own
// parser (so --help and a bad flag need no daemon program), then the
// program replaces this process with the same arguments (execDaemon).
func cmdDaemon(_ context.Context, s streams, args []string) int {
	if _, code, done := daemon.ParseCommandLine(args, s.out, s.err); done {
		return code
	}
	return execDaemon(args, s.err)
}
