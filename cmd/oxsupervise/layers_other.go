//go:build !linux

package main

import (
	"context"
	"io"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// sessionLayers are Linux's cgroup-keyed layers; other systems have none.
type sessionLayers struct{ plan *planner.Plan }

func buildLayers(verb planner.Verb, c *policy.Compiled, cfg cgroup.Config, unavailable map[string]bool, warn io.Writer) (*sessionLayers, error) {
	return &sessionLayers{}, nil
}

func (ls *sessionLayers) list() []session.SessionLayer { return nil }

func (ls *sessionLayers) close(warn io.Writer) {}

func (ls *sessionLayers) holdAttached(ctx context.Context, warn io.Writer, e *session.Entry, cfg cgroup.Config, reg session.Registry) {
}
