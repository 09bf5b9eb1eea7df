//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/policy"
)

// RunCLI is `oxsupervise run` through the daemon: it sends the request
// with this process's stdin, stdout and stderr, forwards terminal signals
// to the command, prints warnings to errOut, and returns the exit status
// the CLI must exit with (the command's own, 125 when the boundary could
// not be built, 2 for requests the daemon refused as invalid). The process
// exits with it: RunCLI leaves its signal relay to that exit.
func RunCLI(ctx context.Context, socket string, argv []string, flags *policy.Flags, errOut io.Writer) int {
	return RunCLIOr(ctx, socket, argv, flags, errOut, nil)
}

// RunCLIOr is RunCLI that, when no daemon listens on socket (the run
// connection's dial failed as Probe's would, nothing was sent), returns
// absent()'s status instead of printing an error. It is how `run` chooses
// between the daemon and a standalone run without a health check of its
// own before the run connection (issue 18: one round trip less). A nil
// absent makes it RunCLI.
func RunCLIOr(ctx context.Context, socket string, argv []string, flags *policy.Flags, errOut io.Writer, absent func() int) int {
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(errOut, "oxsupervise run: current directory: %v\n", err)
		return ExitFail
	}
	pf, err := RequestFlags(flags, cwd)
	if err != nil {
		fmt.Fprintf(errOut, "oxsupervise run: %v\n", err)
		return ExitUsage
	}
	// OXSUPERVISE_DEBUG_TIMING: this client's phases, and the daemon's
	// (timing events) between them.
	tm := phasetime.FromEnv(os.Getenv(phasetime.Env), errOut)
	c := &Client{Socket: socket}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var mu sync.Mutex
	var sid string
	sigs := make(chan os.Signal, 8)
	// The relay is not stopped when RunCLI returns: the CLI exits with
	// its status then, and the relay with it. Stopping it first would
	// cost a round trip to the runtime's signal-mask thread per signal
	// (signal.Stop, 0.15-0.45 ms here) after the session ended.
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGWINCH, unix.SIGUSR1, unix.SIGUSR2)
	go func() {
		for sig := range sigs {
			mu.Lock()
			id := sid
			mu.Unlock()
			if id == "" {
				if sig != unix.SIGWINCH {
					cancel() // before the command started: give up
				}
				continue
			}
			c.Signal(context.Background(), id, int(sig.(unix.Signal)))
		}
	}()
	final, err := c.Run(ctx, RunRequest{Argv: argv, Env: os.Environ(), Dir: cwd, Policy: pf, Timing: tm != nil},
		[3]*os.File{os.Stdin, os.Stdout, os.Stderr}, func(e Event) {
			switch e.Event {
			case "started":
				mu.Lock()
				sid = e.Session
				mu.Unlock()
				tm.Mark("client: started event")
			case "warning", "timing":
				fmt.Fprintln(errOut, e.Message)
			}
		})
	tm.Mark("client: final event")
	var de *Error
	switch {
	case absent != nil && errors.Is(err, ErrNoDaemon):
		return absent()
	case errors.As(err, &de):
		fmt.Fprintf(errOut, "oxsupervise run: %s; nothing ran\n", de.Message)
		return ExitCode(de, ExitNoBoundary)
	case err != nil:
		mu.Lock()
		started := sid != ""
		mu.Unlock()
		if started {
			fmt.Fprintf(errOut, "oxsupervise run: lost the daemon during session %s: %v\n", sid, err)
			return ExitFail
		}
		fmt.Fprintf(errOut, "oxsupervise run: %v; nothing ran\n", err)
		return ExitCode(err, ExitNoBoundary)
	case final.Event == "error":
		fmt.Fprintf(errOut, "oxsupervise run: %s\n", final.Message)
		return final.Code
	}
	return final.Code
}
