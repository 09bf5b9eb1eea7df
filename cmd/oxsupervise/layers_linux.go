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

// sessionLayers are the enforcement host of one standalone run or attach
// and the plan of its session. The CLI keeps the host alive for as long
// as the session: the daemon differs only in keeping one for all.
type sessionLayers struct {
	host *host.Host
	plan *planner.Plan
}

// buildLayers opens the host with the BPF layers c would use, and decides
// c's layers for verb (package planner). A *session.BoundaryError means c
// needs a layer nothing here provides; nothing is left loaded then.
func buildLayers(verb planner.Verb, c *policy.Compiled, cfg cgroup.Config, unavailable map[string]bool, warn io.Writer) (*sessionLayers, error) {
	h := host.Open(host.Options{
		Cgroup: cfg, KernelBuffer: int(c.Audit.KernelBuffer), ResolverUpstreamList: os.Getenv(resolverUpstreamEnv),
		Unavailable: unavailable, Pins: standalonePins(cfg), Warn: warn,
	}, planner.Wants(c))
	plan, err := h.Plan(verb, c, planner.Probe(unavailable))
	if err != nil {
		h.Close()
		return nil, err
	}
	return &sessionLayers{host: h, plan: plan}, nil
}

// list returns the layers for RunOptions.Layers / AttachOptions.Layers.
func (ls *sessionLayers) list() []session.SessionLayer { return ls.host.Layers(ls.plan) }

// close releases the host. Call it only when no session of its layers
// has a process left.
func (ls *sessionLayers) close(warn io.Writer) {
	if err := ls.host.Close(); err != nil {
		fmt.Fprintf(warn, "oxsupervise: %v\n", err)
	}
}

// holdAttached keeps an attached session's layers alive: they live in this
// process (programs, resolver, audit of refusals), so attach stays in the
// foreground until the session's last process exits or `oxsupervise stop`
// removes it. Interrupting it ends the session rather than leaving its
// processes without the rules they were attached under.
func (ls *sessionLayers) holdAttached(ctx context.Context, warn io.Writer, e *session.Entry, cfg cgroup.Config, reg session.Registry) {
	var names []string
	for _, l := range ls.list() {
		names = append(names, l.Name())
	}
	if len(names) == 0 {
		ls.close(warn)
		return
	}
	fmt.Fprintf(warn, "oxsupervise attach: session %s: the %s rules live in this process; it stays until the session's processes exit (interrupting it ends the session)\n",
		e.ID, strings.Join(names, ", "))
	g, err := cgroup.OpenSession(cfg, e.ID)
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise attach: session %s: %v\n", e.ID, err)
		ls.close(warn)
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
	ls.close(warn)
	if err := g.Remove(kctx); err != nil {
		fmt.Fprintf(warn, "oxsupervise attach: session %s: %v\n", e.ID, err)
	}
	if err := reg.Delete(e.ID); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(warn, "oxsupervise attach: session %s: %v\n", e.ID, err)
	}
}
