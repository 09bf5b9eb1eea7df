//go:build !linux

package main

import (
	"context"
	"fmt"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/daemon"
)

// auditTailDaemon is not reached: there is no daemon on this OS.
func auditTailDaemon(_ context.Context, s streams, _ string, _ daemon.AuditQuery, _ bool, _ audit.HumanOptions) int {
	fmt.Fprintln(s.err, "oxsupervise audit tail: the daemon is not supported on this OS")
	return exitFail
}
