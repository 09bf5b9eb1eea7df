//go:build !linux

package main

import (
	"context"

	"github.com/openoxide/oxsupervise/session"
)

// attachStandalone: other systems have no cgroup-keyed layers, and
// session.Attach says sessions are not supported.
func attachStandalone(ctx context.Context, s streams, opts session.AttachOptions) int {
	e, err := session.Attach(ctx, opts)
	return reportAttach(s, opts.PID, e, err)
}
