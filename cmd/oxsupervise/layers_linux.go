//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/openoxide/oxsupervise/audit/bpfring"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/loader"
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

// layerRequest is what a layer builder decides from.
type layerRequest struct {
	verb        string // "run" or "attach"
	policy      *policy.Compiled
	cgroup      cgroup.Config
	unavailable map[string]bool
	warn        io.Writer
	// events returns the ring buffer every BPF layer reports refusals in,
	// opened by the first layer that asks.
	events func() (*bpfring.Ring, error)
}

// builtLayer is one SessionLayer and what releases it once its sessions
// are gone.
type builtLayer struct {
	layer session.SessionLayer
	close func() error
}

// layerBuilder returns the layer req needs, or a zero builtLayer when the
// policy does not need it or another layer (a fallback the session package
// chooses) covers it. An error means the policy needs the layer and it
// cannot be built: the caller exits 125 and nothing runs.
type layerBuilder func(req layerRequest) (builtLayer, error)

// layerBuilders lists the SessionLayers in the order they are applied.
// A new layer (BPF-LSM filesystem rules) is one more entry here.
func layerBuilders() []layerBuilder {
	return []layerBuilder{buildFSLayer, buildNetworkLayer}
}

// sessionLayers are the layers built for one run or attach.
type sessionLayers struct {
	built []builtLayer
	// ring is the BPF layers' shared ring buffer, if one was opened.
	ring *bpfring.Ring
}

// buildLayers builds every layer c needs for verb. On error nothing is
// left attached.
func buildLayers(verb string, c *policy.Compiled, cfg cgroup.Config, unavailable map[string]bool, warn io.Writer) (*sessionLayers, error) {
	ls := &sessionLayers{}
	req := layerRequest{verb: verb, policy: c, cgroup: cfg, unavailable: unavailable, warn: warn}
	req.events = func() (*bpfring.Ring, error) {
		if ls.ring == nil {
			r, err := bpfring.Open(bpfring.Options{Size: int(c.Audit.KernelBuffer), Warn: warn})
			if err != nil {
				return nil, err
			}
			ls.ring = r
		}
		return ls.ring, nil
	}
	for _, build := range layerBuilders() {
		b, err := build(req)
		if err != nil {
			ls.close(warn)
			return nil, err
		}
		if b.layer != nil {
			ls.built = append(ls.built, b)
		}
	}
	return ls, nil
}

// list returns the layers for RunOptions.Layers / AttachOptions.Layers.
func (ls *sessionLayers) list() []session.SessionLayer {
	out := make([]session.SessionLayer, 0, len(ls.built))
	for _, b := range ls.built {
		out = append(out, b.layer)
	}
	return out
}

// close releases the layers in reverse order, then their ring buffer.
// Call it only when no session of theirs has a process left.
func (ls *sessionLayers) close(warn io.Writer) {
	for i := len(ls.built) - 1; i >= 0; i-- {
		if b := ls.built[i]; b.close != nil {
			if err := b.close(); err != nil {
				fmt.Fprintf(warn, "oxsupervise: %s layer: %v\n", b.layer.Name(), err)
			}
		}
	}
	ls.built = nil
	if ls.ring != nil {
		if err := ls.ring.Close(); err != nil {
			fmt.Fprintf(warn, "oxsupervise: kernel event ring buffer: %v\n", err)
		}
		ls.ring = nil
	}
}

// buildNetworkLayer attaches the cgroup BPF network programs on the
// sessions' parent group. Network "full" with loopback "all" needs none.
// When cgroup BPF is unavailable, run still enforces "none" with an empty
// network namespace (session.Decide), so that case is a warning; an
// allowlist, and anything for attach, cannot be enforced without it.
func buildNetworkLayer(req layerRequest) (builtLayer, error) {
	n := req.policy.Network
	if n.Policy == policy.NetFull && (n.Loopback == policy.LoopbackAll || n.Loopback == "") {
		return builtLayer{}, nil
	}
	var l *session.NetworkLayer
	err := errors.New("marked unavailable by " + session.ForceUnavailableEnv)
	if !req.unavailable[session.LayerNetwork] {
		l, err = newNetworkLayer(req)
	}
	if err == nil {
		return builtLayer{layer: l, close: l.Close}, nil
	}
	switch {
	case req.unavailable[session.LayerNetwork] && n.Policy != policy.NetFull:
		// session.Run and session.Attach decide: a fallback or a refusal.
		return builtLayer{}, nil
	case n.Policy == policy.NetFull:
		fmt.Fprintf(req.warn, "oxsupervise %s: warning: cgroup network layer unavailable (%v): network loopback = %q is NOT enforced; the session reaches every loopback service\n",
			req.verb, err, n.Loopback)
		return builtLayer{}, nil
	case req.verb == "run" && (n.Policy == policy.NetNone || n.Policy == ""):
		fmt.Fprintf(req.warn, "oxsupervise run: warning: cgroup network layer unavailable (%v): network none is enforced with an empty network namespace instead\n", err)
		return builtLayer{}, nil
	}
	return builtLayer{}, &session.BoundaryError{Layer: session.LayerNetwork, Err: err}
}

// buildFSLayer loads the BPF-LSM filesystem programs when the policy has
// filesystem rules and BPF-LSM is usable (DESIGN §3: bpf among the active
// LSMs and a probe program loads and attaches; one probe per command).
// Without it, run falls back to Landlock plus the mount namespace and
// attach says it enforces no filesystem rules; package session decides
// and words both, so unavailability is not an error here.
func buildFSLayer(req layerRequest) (builtLayer, error) {
	if !req.policy.FilesystemRules || req.unavailable[session.LayerBPFLSM] {
		return builtLayer{}, nil
	}
	if err := loader.ProbeBPFLSM(); err != nil {
		return builtLayer{}, nil
	}
	if err := fsguard.CheckPolicy(req.policy); err != nil {
		fmt.Fprintf(req.warn, "oxsupervise %s: warning: BPF-LSM is usable but not for this policy: %v\n", req.verb, err)
		return builtLayer{}, nil
	}
	ring, err := req.events()
	var l *session.FSLayer
	if err == nil {
		l, err = session.NewFSLayer(session.FSConfig{Events: ring, Warn: req.warn})
	}
	if err != nil {
		fmt.Fprintf(req.warn, "oxsupervise %s: warning: BPF-LSM is usable but the filesystem programs did not load: %v\n", req.verb, err)
		return builtLayer{}, nil
	}
	return builtLayer{layer: l, close: l.Close}, nil
}

func newNetworkLayer(req layerRequest) (*session.NetworkLayer, error) {
	parent, err := cgroup.ParentDir(req.cgroup)
	if err != nil {
		return nil, err
	}
	var upstream []string
	if v := os.Getenv(resolverUpstreamEnv); v != "" {
		for _, hp := range strings.Split(v, ",") {
			hp = strings.TrimSpace(hp)
			if _, _, err := net.SplitHostPort(hp); err != nil {
				return nil, fmt.Errorf("%s: %q is not host:port: %w", resolverUpstreamEnv, hp, err)
			}
			upstream = append(upstream, hp)
		}
	}
	ring, err := req.events()
	if err != nil {
		return nil, err
	}
	return session.NewNetworkLayer(session.NetworkConfig{Parent: parent, Upstream: upstream, Events: ring, Warn: req.warn})
}

// holdAttached keeps an attached session's layers alive: they live in this
// process (programs, resolver, audit of refusals), so attach stays in the
// foreground until the session's last process exits or `oxsupervise stop`
// removes it. Interrupting it ends the session rather than leaving its
// processes without the rules they were attached under.
func (ls *sessionLayers) holdAttached(ctx context.Context, warn io.Writer, e *session.Entry, cfg cgroup.Config, reg session.Registry) {
	if len(ls.built) == 0 {
		return
	}
	var names []string
	for _, b := range ls.built {
		names = append(names, b.layer.Name())
	}
	fmt.Fprintf(warn, "oxsupervise attach: session %s: the %s rules live in this process; it stays until the session's processes exit (interrupting it ends the session)\n",
		e.ID, strings.Join(names, ", "))
	g, err := cgroup.OpenSession(cfg, e.ID)
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise attach: session %s: %v\n", e.ID, err)
		ls.close(warn)
		return
	}
	if waitUnpopulated(ctx, g.Path) {
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

// waitUnpopulated polls dir's cgroup.events until the group is empty or
// gone; it reports whether ctx ended the wait instead.
func waitUnpopulated(ctx context.Context, dir string) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil || strings.Contains(string(b), "populated 0") {
			return false
		}
		select {
		case <-ctx.Done():
			return true
		case <-tick.C:
		}
	}
}
