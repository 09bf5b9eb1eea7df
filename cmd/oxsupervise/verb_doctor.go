package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/doctor"
)

// cmdDoctor reports which enforcement layers this machine supports. It exits
// 0 only when a complete filesystem layer and the network layer are both
// available, so scripts can gate on it.
func cmdDoctor(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("doctor", pflag.ContinueOnError)
	fs.SetOutput(s.err)
	fs.Usage = func() {
		fmt.Fprintln(s.err, "usage: oxsupervise doctor [--json]")
		fmt.Fprintln(s.err, "\nReport the kernel features oxsupervise needs, the enforcement layers and")
		fmt.Fprintln(s.err, "sandbox modes they allow, and how to enable what is missing. Run as root.")
		fmt.Fprintln(s.err, "Exit 0 when a complete filesystem layer (bpf-lsm or landlock) and the")
		fmt.Fprintln(s.err, "network layer are available, 1 otherwise.")
		fmt.Fprintln(s.err)
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print the report as JSON (schema_version 1, see package doctor)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.err, "oxsupervise doctor: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}

	report := doctor.Run(ctx)
	if *asJSON {
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			fmt.Fprintf(s.err, "oxsupervise doctor: %v\n", err)
			return exitFail
		}
	} else if err := report.WriteText(s.out); err != nil {
		fmt.Fprintf(s.err, "oxsupervise doctor: %v\n", err)
		return exitFail
	}
	if !report.Verdict.OK {
		return exitFail
	}
	return exitOK
}
