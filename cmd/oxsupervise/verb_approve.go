package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/daemon"
)

func cmdApprove(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("approve", pflag.ContinueOnError)
	once := fs.Bool("once", false, "approve this request only")
	always := fs.Bool("always", false, "approve, and remember the command pattern or host name in <workspace>/.openoxide/approvals.toml")
	reject := fs.Bool("reject", false, "refuse the request")
	socket := fs.String("socket", defaultSocket(), "daemon socket")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise approve ID --once|--always|--reject [--socket PATH]")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "approve", args); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(s.err, "oxsupervise approve: give exactly one approval ID (see oxsupervise approvals)")
		return exitUsage
	}
	var reply string
	n := 0
	for _, c := range []struct {
		set   bool
		reply string
	}{{*once, daemon.ReplyOnce}, {*always, daemon.ReplyAlways}, {*reject, daemon.ReplyReject}} {
		if c.set {
			n++
			reply = c.reply
		}
	}
	if n != 1 {
		fmt.Fprintln(s.err, "oxsupervise approve: give exactly one of --once, --always, --reject")
		return exitUsage
	}
	c := &daemon.Client{Socket: *socket}
	if err := c.Reply(ctx, fs.Arg(0), reply); err != nil {
		fmt.Fprintf(s.err, "oxsupervise approve: %v\n", err)
		return daemon.ExitCode(err, exitFail)
	}
	fmt.Fprintf(s.out, "%s: %s\n", fs.Arg(0), reply)
	return exitOK
}
