//go:build linux

package host

import (
	"context"

	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/session"
)

// The supervisor core: how a session is created on a host, the same for
// the standalone CLI and for the daemon's handlers, which differ only in
// how the request reaches them and in who keeps the host alive.

// Run runs opts.Argv in a new session on h: its layers are those the
// planner decides for opts.Policy on the kernel (probed with
// opts.Unavailable) and this host, and h's BPF layers among them are
// applied (before opts.Layers, a caller's own). A *session.BoundaryError
// means nothing ran.
func (h *Host) Run(ctx context.Context, opts session.RunOptions) (int, error) {
	plan, err := h.Plan(planner.Run, opts.Policy, planner.Probe(opts.Unavailable), planner.Options{})
	if err != nil {
		return 0, err
	}
	opts.Plan = plan
	opts.Layers = append(h.Layers(plan), opts.Layers...)
	return session.Run(ctx, opts)
}

// Attach confines the running process tree of opts.PID in a new session
// on h, as Run decides and applies layers. The session outlives the call:
// its BPF layers stay applied until their owner removes them, so wrap,
// when set, is given each layer first (the daemon records their
// teardowns). It returns the plan with the entry, to say which layers the
// session holds.
func (h *Host) Attach(ctx context.Context, opts session.AttachOptions, wrap func(session.SessionLayer) session.SessionLayer) (*session.Entry, *planner.Plan, error) {
	plan, err := h.Plan(planner.Attach, opts.Policy, planner.Probe(opts.Unavailable), planner.Options{NetworkOnly: opts.NetworkOnly})
	if err != nil {
		return nil, nil, err
	}
	layers := h.Layers(plan)
	if wrap != nil {
		for i, l := range layers {
			layers[i] = wrap(l)
		}
	}
	opts.Plan = plan
	opts.Layers = append(layers, opts.Layers...)
	e, err := session.Attach(ctx, opts)
	return e, plan, err
}
