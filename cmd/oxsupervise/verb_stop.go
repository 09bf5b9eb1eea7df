package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/daemon"
	"github.com/openoxide/oxsupervise/session"
)

func cmdStop(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("stop", pflag.ContinueOnError)
	fs.SetOutput(s.err)
	socket := fs.String("socket", defaultSocket(), "daemon socket (used when the caller is not root and the daemon answers)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise stop SESSION [--socket PATH]\n\nKill every process of SESSION and remove it (ids: oxsupervise sessions).\nAs root directly; otherwise through the daemon, for your own sessions.")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "stop", args); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(s.err, "oxsupervise stop: exactly one SESSION id expected (see `oxsupervise sessions`)")
		return exitUsage
	}
	if useDaemon(*socket) {
		if err := (&daemon.Client{Socket: *socket}).Stop(ctx, fs.Arg(0)); err != nil {
			fmt.Fprintf(s.err, "oxsupervise stop: %v\n", err)
			return daemon.ExitCode(err, exitFail)
		}
		return exitOK
	}
	if os.Geteuid() != 0 {
		fmt.Fprintf(s.err, "oxsupervise stop: needs root (run it with sudo), or the daemon (no daemon answers on %s)\n", *socket)
		return exitFail
	}
	if err := session.Stop(ctx, cgroup.Config{}, session.Registry{}, fs.Arg(0)); err != nil {
		fmt.Fprintf(s.err, "oxsupervise stop: %v\n", err)
		return exitFail
	}
	return exitOK
}
