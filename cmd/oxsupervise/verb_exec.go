package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/daemon"
)

func cmdExec(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("exec", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	unsandboxed := fs.Bool("unsandboxed", false, "run CMD outside the session, after approval (required)")
	socket := fs.String("socket", defaultSocket(), "daemon socket")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise exec --unsandboxed [--socket PATH] -- CMD [ARG...]")
		fmt.Fprintln(fs.Output(), "Inside a session: asks the daemon to run CMD outside the sandbox; waits for `oxsupervise approve`.")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "exec", args); done {
		return code
	}
	if !*unsandboxed {
		fmt.Fprintln(s.err, "oxsupervise exec: --unsandboxed is required (exec only exists to leave the sandbox, with approval)")
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(s.err, "oxsupervise exec: no command given (usage: oxsupervise exec --unsandboxed -- CMD [ARG...])")
		return exitUsage
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise exec: current directory: %v\n", err)
		return exitFail
	}
	c := &daemon.Client{Socket: *socket}
	final, err := c.Exec(ctx, daemon.ExecRequest{Argv: fs.Args(), Env: os.Environ(), Dir: wd},
		[3]*os.File{os.Stdin, os.Stdout, os.Stderr}, func(e daemon.Event) {
			switch e.Event {
			case "pending":
				fmt.Fprintf(s.err, "oxsupervise exec: %s\n", e.Message)
			case "warning":
				fmt.Fprintf(s.err, "oxsupervise exec: warning: %s\n", e.Message)
			}
		})
	var de *daemon.Error
	switch {
	case errors.As(err, &de):
		fmt.Fprintf(s.err, "oxsupervise exec: refused: %s\n", de.Message)
		return daemon.ExitCode(err, exitFail)
	case err != nil:
		fmt.Fprintf(s.err, "oxsupervise exec: %v\n", err)
		return exitFail
	case final.Event == "rejected":
		fmt.Fprintf(s.err, "oxsupervise exec: not approved: %s\n", final.Message)
		return exitFail
	case final.Event == "error":
		fmt.Fprintf(s.err, "oxsupervise exec: %s\n", final.Message)
	}
	return final.Code
}
