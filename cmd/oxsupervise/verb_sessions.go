package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/daemon"
	"github.com/openoxide/oxsupervise/session"
)

// useDaemon reports whether a verb that acts on sessions goes through the
// daemon: the caller is not root (root acts directly, as a standalone
// supervisor does) and a daemon answers on socket. The daemon then
// decides what the caller may see and do, by its kernel-reported uid.
func useDaemon(socket string) bool {
	return os.Geteuid() != 0 && daemon.Available(socket)
}

func cmdSessions(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("sessions", pflag.ContinueOnError)
	fs.SetOutput(s.err)
	asJSON := fs.Bool("json", false, "print JSON")
	socket := fs.String("socket", defaultSocket(), "daemon socket (used when the caller is not root and the daemon answers)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise sessions [--json] [--socket PATH]")
		fmt.Fprintln(fs.Output(), "\nAs root: every session on this machine. Otherwise, through the daemon: your own sessions.")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "sessions", args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.err, "oxsupervise sessions: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	var list []session.Status
	var err error
	if useDaemon(*socket) {
		list, err = (&daemon.Client{Socket: *socket}).Sessions(ctx)
	} else {
		list, err = session.List(cgroup.Config{}, session.Registry{})
	}
	if err != nil && list == nil {
		fmt.Fprintf(s.err, "oxsupervise sessions: %v\n", err)
		return daemon.ExitCode(err, exitFail)
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
