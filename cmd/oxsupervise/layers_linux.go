//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/host"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// resolverUpstreamEnv overrides the DNS upstream of the sessions'
// resolvers (comma-separated host:port), which is otherwise the
// nameservers of /etc/resolv.conf. Tests point it at a DNS server in their
// own network namespace. It is deliberately not a flag: it changes where
// allowed names are resolved, never which names or addresses are allowed
// (the resolver's rebinding guard still applies to every answer).
const resolverUpstreamEnv = "OXSUPERVISE_RESOLVER_UPSTREAM"

// pinDirEnv overrides where a standalone run or attach keeps its BPF
// programs pinned for the next one to reuse (host.Cache); "off" keeps them
// in the process, loaded at every start. Tests point it at a directory of
// their own.
const pinDirEnv = "OXSUPERVISE_PIN_DIR"

// standalonePins is the host.Cache of a standalone run or attach.
func standalonePins(cfg cgroup.Config) host.Pinning {
	dir := os.Getenv(pinDirEnv)
	switch dir {
	case "off":
		return nil
	case "":
		dir = host.DefaultPinDir
	}
	return &host.Cache{Dir: dir, Cgroup: cfg}
}

// openHost opens the enforcement host of one standalone run or attach
// with the BPF layers c would use. The CLI keeps it alive for as long as
// the session: the daemon differs only in keeping one for all of its
// sessions.
func openHost(c *policy.Compiled, cfg cgroup.Config, unavailable map[string]bool, warn io.Writer, tm *phasetime.Recorder) *host.Host {
	return host.Open(host.Options{
		Cgroup: cfg, KernelBuffer: int(c.Audit.KernelBuffer), ResolverUpstreamList: os.Getenv(resolverUpstreamEnv),
		Unavailable: unavailable, Pins: standalonePins(cfg), Warn: warn, Timing: tm,
	}, planner.Wants(c))
}

// closeHost releases h. Call it only when no session of its layers has a
// process left.
func closeHost(h *host.Host, warn io.Writer) {
	if err := h.Close(); err != nil {
		fmt.Fprintf(warn, "oxsupervise: %v\n", err)
	}
}

// attachStandalone confines opts.PID on a host of its own and keeps the
// host alive for as long as the session (holdAttached).
func attachStandalone(ctx context.Context, s streams, opts session.AttachOptions) int {
	// A wrong pid is reported as such, before whether its boundary can be
	// built.
	if err := session.CheckAttachable(opts); err != nil {
		return reportAttach(s, opts.PID, nil, err)
	}
	if err := attachPreflight(opts); err != nil {
		return reportAttach(s, opts.PID, nil, err)
	}
	h := openHost(opts.Policy, cgroup.Config{}, opts.Unavailable, s.err, nil)
	e, plan, err := h.Attach(ctx, opts, nil)
	code := reportAttach(s, opts.PID, e, err)
	if e == nil {
		closeHost(h, s.err)
		return code
	}
	// Attached (recorded or not): the host's layers hold it.
	holdAttached(ctx, s.err, h, plan, e, cgroup.Config{}, session.Registry{})
	return code
}

// attachPreflight asks the planner, before the host loads and pins any
// program, whether the kernel's BPF-LSM verdict alone refuses this attach
// (filesystem rules, no BPF-LSM, no --network-only): then nothing at all
// is left behind. The host decides again with what it actually loads.
func attachPreflight(opts session.AttachOptions) error {
	if opts.NetworkOnly || !planner.Wants(opts.Policy).BPFLSM {
		return nil
	}
	caps := planner.Probe(opts.Unavailable)
	// Only the filesystem layer is in question here: the others are
	// taken as there, and judged by the host's decision.
	caps.BPFLSM, caps.Network, caps.ReadOnlyViewAudit = loader.ProbeBPFLSM(), nil, nil
	_, err := planner.Decide(planner.Attach, opts.Policy, caps.Force(opts.Unavailable), planner.Options{})
	var be *planner.BoundaryError
	if errors.As(err, &be) && be.Layer == planner.LayerBPFLSM {
		return err
	}
	return nil
}

// holdAttached keeps an attached session's layers alive: they live in this
// process (programs, resolver, audit of refusals), so attach stays in the
// foreground until the session's last process exits or `oxsupervise stop`
// removes it. Interrupting it ends the session rather than leaving its
// processes without the rules they were attached under.
func holdAttached(ctx context.Context, warn io.Writer, h *host.Host, plan *planner.Plan, e *session.Entry, cfg cgroup.Config, reg session.Registry) {
	var names []string
	for _, l := range h.Layers(plan) {
		names = append(names, l.Name())
	}
	if len(names) == 0 {
		closeHost(h, warn)
		return
	}
	fmt.Fprintf(warn, "oxsupervise attach: session %s: the %s rules live in this process; it stays until the session's processes exit (interrupting it ends the session)\n",
		e.ID, strings.Join(names, ", "))
	g, err := cgroup.OpenSession(cfg, e.ID)
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise attach: session %s: %v\n", e.ID, err)
		closeHost(h, warn)
		return
	}
	if _, err := g.WaitEnd(ctx); err != nil {
		fmt.Fprintf(warn, "oxsupervise attach: session %s: interrupted; ending the session\n", e.ID)
	}
	kctx, cancel := context.WithTimeout(context.Background(), cgroup.DefaultTimeout)
	defer cancel()
	if _, err := os.Stat(g.Path); err == nil {
		if err := g.Kill(kctx); err != nil {
			fmt.Fprintf(warn, "oxsupervise attach: session %s: %v\n", e.ID, err)
		}
	}
	closeHost(h, warn)
	if err := g.Remove(kctx); err != nil {
		fmt.Fprintf(warn, "oxsupervise attach: session %s: %v\n", e.ID, err)
	}
	if err := reg.Delete(e.ID); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(warn, "oxsupervise attach: session %s: %v\n", e.ID, err)
	}
}
