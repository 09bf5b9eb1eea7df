package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/daemon"
)

func cmdApprovals(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("approvals", pflag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	socket := fs.String("socket", defaultSocket(), "daemon socket")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise approvals [--json] [--socket PATH]")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "approvals", args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.err, "oxsupervise approvals: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	c := &daemon.Client{Socket: *socket}
	list, err := c.Approvals(ctx)
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise approvals: %v\n", err)
		return daemon.ExitCode(err, exitFail)
	}
	if *asJSON {
		if list == nil {
			list = []daemon.Approval{}
		}
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		enc.Encode(list)
		return exitOK
	}
	if len(list) == 0 {
		fmt.Fprintln(s.out, "no pending approvals")
		return exitOK
	}
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSESSION\tUID\tEXPIRES\tREQUEST")
	for _, a := range list {
		what := strings.Join(a.Command, " ")
		if a.Host != "" {
			what = "DNS lookup of " + a.Host
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", a.ID, a.Kind, a.Session, a.UID,
			time.Until(a.Expires).Round(time.Second), what)
	}
	tw.Flush()
	return exitOK
}
