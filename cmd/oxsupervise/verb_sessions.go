package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/session"
)

func cmdSessions(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("sessions", pflag.ContinueOnError)
	fs.SetOutput(s.err)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise sessions [--json]")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "sessions", args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.err, "oxsupervise sessions: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	list, err := session.List(cgroup.Config{}, session.Registry{})
	if err != nil && list == nil {
		fmt.Fprintf(s.err, "oxsupervise sessions: %v\n", err)
		return exitFail
	}
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise sessions: warning: %v\n", err)
	}
	if *asJSON {
		if list == nil {
			list = []session.Status{}
		}
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(list); err != nil {
			return exitFail
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tKIND\tSTATE\tPROCS\tMODE\tUID\tSTARTED\tCOMMAND")
	for _, st := range list {
		started := ""
		if !st.Started.IsZero() {
			started = st.Started.Format("2006-01-02T15:04:05Z")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", st.ID, st.Kind, st.State, len(st.Procs), st.Mode, st.UID,
			started, strings.Join(st.Command, " "))
	}
	tw.Flush()
	return exitOK
}
