//go:build linux

package main

import (
	"context"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/daemon"
)

// auditTailDaemon is `audit tail` through the daemon: it filters on its
// side and sends only the records of the caller's own sessions (all of
// them to root and admins).
func auditTailDaemon(ctx context.Context, s streams, socket string, q daemon.AuditQuery, asJSON bool, human audit.HumanOptions) int {
	p := &recordPrinter{s: s, asJSON: asJSON, human: human}
	err := (&daemon.Client{Socket: socket}).AuditTail(ctx, q, func(line []byte) error { return p.print(line, nil) })
	return tailEnded(s, err)
}
