package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/daemon"
)

func cmdAudit(ctx context.Context, s streams, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(s.err, "usage: oxsupervise audit tail [flags]")
		return exitUsage
	}
	switch args[0] {
	case "tail":
		return cmdAuditTail(ctx, s, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(s.out, "usage: oxsupervise audit tail [flags]\n\nRun 'oxsupervise audit tail --help' for its flags.")
		return exitOK
	}
	fmt.Fprintf(s.err, "oxsupervise audit: unknown subcommand %q (want tail)\n", args[0])
	return exitUsage
}

func cmdAuditTail(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("audit tail", pflag.ContinueOnError)
	fs.SetOutput(s.err)
	follow := fs.BoolP("follow", "f", false, "keep printing records as they are written, across log rotation")
	session := fs.String("session", "", "only records of this session id")
	pid := fs.Int("pid", 0, "only records of this process id")
	op := fs.String("op", "", "only records whose event.action is OP (open, unlink, connect, dns, session_start, ...)")
	since := fs.String("since", "", "only records newer than DURATION ago (e.g. 10m) or an RFC 3339 time; also reads rotated files")
	asJSON := fs.Bool("json", false, "print the records' JSON lines instead of aligned columns")
	logPath := fs.String("audit-log", audit.DefaultPath, "audit log to read")
	socket := fs.String("socket", defaultSocket(), "daemon socket: a user who is not root and gives no --audit-log reads their own sessions' records through the daemon")
	// Usage is only printed for --help (ContinueOnError), so it goes to
	// stdout like any requested output.
	fs.Usage = func() {
		fmt.Fprintln(s.out, "usage: oxsupervise audit tail [-f] [--session ID] [--pid N] [--op OP] [--since DURATION] [--json] [--audit-log PATH]")
		fmt.Fprintln(s.out, "\nWithout -f, prints every matching record of the log, rotated files included.")
		fmt.Fprintln(s.out, "With -f, prints the live file's records (and rotated ones when --since is given), then follows.")
		fmt.Fprintln(s.out)
		fs.SetOutput(s.out)
		fs.PrintDefaults()
		fs.SetOutput(s.err)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(s.err, "oxsupervise audit tail: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.err, "oxsupervise audit tail: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *pid < 0 {
		fmt.Fprintf(s.err, "oxsupervise audit tail: --pid %d is not a process id\n", *pid)
		return exitUsage
	}
	filter := audit.Filter{Session: *session, PID: *pid, Op: *op}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			fmt.Fprintf(s.err, "oxsupervise audit tail: --since: %v\n", err)
			return exitUsage
		}
		filter.Since = t
	}
	human := audit.HumanOptions{Colour: !*asJSON && isTerminal(s.out), Location: time.Local}
	if !fs.Changed("audit-log") && os.Geteuid() != 0 && daemon.Available(*socket) {
		q := daemon.AuditQuery{Follow: *follow, Session: filter.Session, PID: filter.PID, Op: filter.Op, Since: filter.Since}
		return auditTailDaemon(ctx, s, *socket, q, *asJSON, human)
	}
	f, err := os.Open(*logPath)
	if err != nil {
		hint := ""
		if errors.Is(err, os.ErrPermission) {
			hint = " (the audit log is readable by root only: try sudo, or start the daemon to read your own sessions' records)"
		}
		fmt.Fprintf(s.err, "oxsupervise audit tail: cannot read the audit log: %v%s\n", err, hint)
		return exitFail
	}
	f.Close()

	opts := audit.TailOptions{
		Follow:  *follow,
		History: !*follow || *since != "",
		OnError: func(err error) { fmt.Fprintf(s.err, "oxsupervise audit tail: warning: %v\n", err) },
	}
	p := &recordPrinter{s: s, asJSON: *asJSON, human: human}
	err = audit.Tail(ctx, *logPath, opts, func(r audit.Record, line []byte) error {
		if !filter.Match(&r) {
			return nil
		}
		return p.print(line, &r)
	})
	return tailEnded(s, err)
}

// recordPrinter writes records as `audit tail` shows them, read from the
// log or from the daemon: their JSON lines, or aligned columns.
type recordPrinter struct {
	s      streams
	asJSON bool
	human  audit.HumanOptions
	out    []byte
}

// print writes the record of line; r is its decoded form, nil when the
// caller has only the line (it is decoded then, and a line that does not
// decode is a warning, not the end of the tail).
func (p *recordPrinter) print(line []byte, r *audit.Record) error {
	p.out = p.out[:0]
	if p.asJSON {
		p.out = append(p.out, line...)
	} else {
		if r == nil {
			dec, err := audit.Decode(line)
			if err != nil {
				fmt.Fprintf(p.s.err, "oxsupervise audit tail: warning: %v\n", err)
				return nil
			}
			r = &dec
		}
		p.out = append(p.out, audit.FormatHuman(r, p.human)...)
	}
	p.out = append(p.out, '\n')
	_, err := p.s.out.Write(p.out)
	return err
}

// tailEnded is the exit status of a tail that ended with err (nil, or the
// context's end when -f is interrupted, is success).
func tailEnded(s streams, err error) int {
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(s.err, "oxsupervise audit tail: %v\n", err)
		return daemon.ExitCode(err, exitFail)
	}
	return exitOK
}

// parseSince accepts a duration before now ("90s", "2h") or an absolute
// RFC 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("duration %q is negative", v)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (10m, 2h) nor an RFC 3339 time", v)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	if os.Getenv("NO_COLOR") != "" { // https://no-color.org
		return false
	}
	return isatty.IsTerminal(f.Fd())
}
