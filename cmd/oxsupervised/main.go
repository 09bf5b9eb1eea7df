// Command oxsupervised is the oxsupervise supervisor daemon. It is started
// as `oxsupervise daemon [flags]`, which executes it with the same flags
// (internal/companion finds it beside oxsupervise or in
// ../libexec/oxsupervise), or directly; its command line is the daemon
// package's (daemon.ParseCommandLine). It is the only program that links
// the exporters (package daemon/exporters: Prometheus, OpenTelemetry and
// their protocol stacks), so that the oxsupervise binary, which every
// client request and standalone session starts, does not initialize them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/openoxide/oxsupervise/daemon"
	"github.com/openoxide/oxsupervise/daemon/exporters"
)

func main() {
	nameProcess()
	opts, code, done := daemon.ParseCommandLine(os.Args[1:], os.Stdout, os.Stderr)
	if done {
		os.Exit(code)
	}
	opts.Exporters = exporters.Start
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code = daemon.Main(ctx, opts, os.Stderr)
	stop()
	os.Exit(code)
}
