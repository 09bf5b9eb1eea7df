//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/daemon"
)

// auditTailDaemon is `audit tail` through the daemon: it filters on its
// side and sends only the records of the caller's own sessions (all of
// them to root and admins).
func auditTailDaemon(ctx context.Context, s streams, socket string, q daemon.AuditQuery, asJSON bool, human audit.HumanOptions) int {
	var out []byte
	err := (&daemon.Client{Socket: socket}).AuditTail(ctx, q, func(line []byte) error {
		out = out[:0]
		if asJSON {
			out = append(out, line...)
		} else {
			r, err := audit.Decode(line)
			if err != nil {
				fmt.Fprintf(s.err, "oxsupervise audit tail: warning: %v\n", err)
				return nil
			}
			out = append(out, audit.FormatHuman(&r, human)...)
		}
		out = append(out, '\n')
		_, err := s.out.Write(out)
		return err
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(s.err, "oxsupervise audit tail: %v\n", err)
		return daemon.ExitCode(err, exitFail)
	}
	return exitOK
}
