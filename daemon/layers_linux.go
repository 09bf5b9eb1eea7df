//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/egress"
	"github.com/openoxide/oxsupervise/host"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// enforcement is the daemon's enforcement host (package host), opened
// once at start with every BPF layer and applied to every session the
// daemon creates or attaches (DESIGN §1: BPF is loaded once and serves
// every session), and the teardowns of attach sessions. A layer that could
// not be built is nil with the reason kept: the planner then gives the
// sessions its fallback (Landlock, an empty network namespace for network
// none) or refuses them with that reason.
type enforcement struct {
	host        *host.Host
	unavailable map[string]bool

	net    *session.NetworkLayer
	netErr error
	fs     *session.FSLayer
	fsErr  error
	// roview is the read-only view's audit (run sessions without
	// BPF-LSM), nil when not built; its program lingers attached for
	// ROViewLinger after the last session that needed it.
	roview *session.ROViewLayer

	mu sync.Mutex
	// attached holds, per cgroup id, the teardowns of the layers applied to
	// an attach session: session.Attach leaves them applied (the session
	// outlives the request), so the daemon removes them when the session
	// ends.
	attached map[uint64][]teardown

	// pins are the pinned generations of the layers this daemon built
	// (host.Generations), pinErr why nothing could be pinned.
	pins   []*pinnedSet
	pinErr error
}

// ROViewLinger is how long the daemon keeps the read-only view audit's
// program attached after the last session that needed it ended. The
// program runs on the exit of every system call of the machine, so it is
// not left attached for good; attaching and detaching it each rewrite the
// system call exit path on every CPU (0.1-3.7 ms each in a VM), which a
// client starting one short session after another (a sandbox per
// command) would otherwise pay for every session. A session that comes
// within the linger finds it attached.
const ROViewLinger = 5 * time.Second

// buildEnforcement opens the host. It never fails: a layer that cannot be
// built is logged at error level and left out. resolverAnswered, when
// set, receives the network layer's resolver answers (the metrics).
func buildEnforcement(opts Options, zl zerolog.Logger, warn io.Writer, resolverAnswered func(egress.DNSAnswer)) *enforcement {
	pinDir := opts.PinDir
	if pinDir == "" {
		pinDir = DefaultPinDir
	}
	h := host.Open(host.Options{
		Cgroup: opts.Cgroup, KernelBuffer: opts.KernelBuffer, ResolverUpstream: opts.ResolverUpstream,
		Unavailable: opts.Unavailable, Pins: host.Generations{Dir: pinDir}, Warn: warn, ResolverAnswered: resolverAnswered,
		ROViewLinger: ROViewLinger, ROViewAfterFunc: opts.roviewAfterFunc,
	}, planner.Want{BPFLSM: true, Network: true, ReadOnlyViewAudit: true})
	e := &enforcement{host: h, unavailable: opts.Unavailable, attached: map[uint64][]teardown{},
		net: h.Network(), netErr: h.NetworkErr(), fs: h.FS(), fsErr: h.FSErr(), roview: h.ROView(), pinErr: h.PinErr()}
	if e.pinErr != nil {
		zl.Error().Err(e.pinErr).Str("pin_dir", pinDir).
			Msg("enforcement is NOT pinned: a crash or kill -9 of the daemon leaves attach sessions without their BPF rules until the next start applies them again")
	}
	if r := h.Ring(); r != nil {
		zl.Info().Int("bytes", r.Size()).Msg("kernel event ring buffer open")
	}
	if e.netErr != nil {
		zl.Error().Str("layer", session.LayerNetwork).Err(e.netErr).
			Msg("cgroup network layer NOT built: network allowlists and attach with network rules are refused; network none falls back to an empty network namespace; loopback rules of full-network sessions are NOT enforced")
	} else {
		zl.Info().Str("layer", session.LayerNetwork).Msg("cgroup network layer built")
	}
	if e.fsErr != nil {
		zl.Warn().Str("layer", session.LayerBPFLSM).Err(e.fsErr).
			Msg("BPF-LSM filesystem layer NOT built: run sessions use Landlock and the mount namespace; attach sessions get no filesystem rules (and are told so)")
	} else {
		zl.Info().Str("layer", session.LayerBPFLSM).Strs("hooks", e.fs.Hooks()).Msg("BPF-LSM filesystem layer built")
	}
	if e.roview != nil {
		zl.Info().Str("layer", session.LayerReadOnlyViewAudit).Dur("linger", ROViewLinger).
			Msg("read-only view audit built: its program is attached while a run session without BPF-LSM needs it and for the linger after the last one")
	} else if err := h.ROViewErr(); e.fs == nil {
		zl.Warn().Str("layer", session.LayerReadOnlyViewAudit).Err(err).
			Msg("read-only view audit NOT built: run sessions without BPF-LSM are refused writes outside their writable roots (EROFS) that are not audited, and are told so")
	}
	for _, spec := range []pinSpec{fsPins(), netPins()} {
		if err := h.PinFailed(spec.layer); err != nil {
			zl.Error().Str("layer", spec.layer).Err(err).
				Msg("layer NOT pinned: a crash or kill -9 of the daemon takes its rules away from attach sessions until the next start")
		}
		if p, ok := h.Pins(spec.layer); ok {
			e.pins = append(e.pins, &pinnedSet{spec: spec, set: p.Set, gen: p.Generation, old: p.Old})
			links, _ := p.Generation.Links()
			zl.Info().Str("layer", spec.layer).Str("pins", p.Generation.Dir).Int("links", len(links)).
				Int("older_generations", len(p.Old)).Msg("layer pinned")
		}
	}
	return e
}

// forSession decides c's layers for verb on the daemon's host (package
// planner) and returns the plan with the layers it applies.
func (e *enforcement) forSession(verb planner.Verb, c *policy.Compiled, opts planner.Options) (*planner.Plan, []session.SessionLayer, error) {
	plan, err := e.host.Plan(verb, c, planner.Probe(e.unavailable), opts)
	if err != nil {
		return nil, nil, err
	}
	return plan, e.host.Layers(plan), nil
}

// recording wraps a layer for session.Attach, which does not tear layers
// down on success, so that the daemon can when the session ends.
type recording struct {
	session.SessionLayer
	e *enforcement
}

func (r recording) Apply(ctx context.Context, s session.SessionInfo) (func(context.Context) error, error) {
	td, err := r.SessionLayer.Apply(ctx, s)
	if err != nil || td == nil {
		return td, err
	}
	// Whoever calls first tears down: session.Attach when a later step
	// fails, release when the session ends.
	var once sync.Once
	var tdErr error
	wrapped := func(ctx context.Context) error {
		once.Do(func() {
			r.e.forgetTeardown(s.CgroupID, &once)
			tdErr = td(ctx)
		})
		return tdErr
	}
	r.e.mu.Lock()
	r.e.attached[s.CgroupID] = append(r.e.attached[s.CgroupID], teardown{once: &once, fn: wrapped})
	r.e.mu.Unlock()
	return wrapped, nil
}

func (e *enforcement) forgetTeardown(cgroupID uint64, once *sync.Once) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var left []teardown
	for _, t := range e.attached[cgroupID] {
		if t.once != once {
			left = append(left, t)
		}
	}
	if len(left) == 0 {
		delete(e.attached, cgroupID)
	} else {
		e.attached[cgroupID] = left
	}
}

// teardown is one recorded layer teardown; once identifies it.
type teardown struct {
	once *sync.Once
	fn   func(context.Context) error
}

// record wraps l so that its teardown is recorded for release.
func (e *enforcement) record(l session.SessionLayer) session.SessionLayer {
	return recording{SessionLayer: l, e: e}
}

// forAttach is forSession with every layer recorded for release.
func (e *enforcement) forAttach(c *policy.Compiled, opts planner.Options) (*planner.Plan, []session.SessionLayer, error) {
	plan, ls, err := e.forSession(planner.Attach, c, opts)
	for i, l := range ls {
		ls[i] = e.record(l)
	}
	return plan, ls, err
}

// release removes an attach session's rules (writing its last refusals
// first). Call it once the session's group is empty or gone.
func (e *enforcement) release(ctx context.Context, cgroupID uint64) error {
	e.mu.Lock()
	tds := append([]teardown(nil), e.attached[cgroupID]...)
	e.mu.Unlock()
	var errs []error
	for i := len(tds) - 1; i >= 0; i-- {
		errs = append(errs, tds[i].fn(ctx))
	}
	return errors.Join(errs...)
}

// holding reports how many attach sessions have layers applied.
func (e *enforcement) holding() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.attached)
}

// close ends the layers as the daemon stops. Attach sessions still
// running keep the rules of every pinned layer: its generation stays
// pinned (the programs stay attached, the session entries stay in their
// maps) for the next daemon to adopt, exactly as after a kill -9. A layer
// that is not pinned is closed and its sessions lose those rules, which
// is logged at error level. With no attach session left every layer is
// closed and its pins are removed.
func (e *enforcement) close(zl zerolog.Logger) error {
	n := e.holding()
	var errs []error
	kept := false
	closeLayer := func(name string, close func() error) {
		p := e.pinnedSet(name)
		if n > 0 && p != nil {
			zl.Info().Str("layer", name).Int("sessions", n).Str("pins", p.gen.Dir).
				Msg("attach sessions stay confined by the pinned programs; the next daemon start adopts them")
			kept = true
			return
		}
		if n > 0 {
			zl.Error().Str("layer", name).Int("sessions", n).
				Msg("attach sessions keep running WITHOUT these rules (the layer is not pinned) until the next daemon start adopts them and applies the rules again")
		}
		errs = append(errs, close())
		if p != nil {
			errs = append(errs, p.gen.Remove())
			p.removeSetDir()
		}
	}
	if e.fs != nil {
		closeLayer(session.LayerBPFLSM, e.fs.Close)
	}
	if e.net != nil {
		closeLayer(session.LayerNetwork, e.net.Close)
	}
	if e.roview != nil {
		// Run sessions only, all ended by now: nothing is kept for the
		// next daemon. Its program is detached (lingering or not).
		errs = append(errs, e.roview.Close())
	}
	// The layers are closed or left to their pins: what is left is the
	// ring buffer. What the pinned programs report from now on stays in
	// the pinned ring buffer, counted by the next daemon (reportUnaudited).
	errs = append(errs, e.host.CloseRing())
	if !kept && len(e.pins) > 0 {
		// Empty now, unless generations this daemon could not retire
		// are left: those keep enforcing.
		os.Remove(filepath.Dir(e.pins[0].set.Dir))
	}
	return errors.Join(errs...)
}

// watchAttached waits until the attach session id (cgroup cgID) has no
// process left or is stopped, then releases its layers and, if its group
// is still there, removes it with its record.
func (s *Server) watchAttached(id string, cgID uint64) {
	defer s.work.Done()
	dir, err := cgroup.ParentDir(s.opts.Cgroup)
	if err != nil {
		s.zl.Error().Str("session", id).Err(err).Msg("cannot watch attach session; its layers stay applied until the daemon stops")
		return
	}
	// The daemon stopping ends the wait: the layers close with it; the
	// session is adopted, and its rules applied again, by the next daemon.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	g := &cgroup.Group{Path: filepath.Join(dir, id)}
	end, err := g.WaitEnd(ctx)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.zl.Warn().Str("session", id).Err(err).Msg("watch attach session")
		}
		return
	}
	s.endAttached(id, cgID, end == cgroup.Emptied)
}

func (s *Server) endAttached(id string, cgID uint64, groupLeft bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.enf.release(ctx, cgID); err != nil {
		s.zl.Error().Str("session", id).Err(err).Msg("release the layers of an ended attach session")
	}
	if groupLeft {
		if err := session.Stop(ctx, s.opts.Cgroup, s.opts.Registry, id); err != nil {
			s.zl.Warn().Str("session", id).Err(err).Msg("remove the group of an ended attach session")
		}
	}
	s.forget(id)
	s.zl.Info().Str("session", id).Bool("group_was_left", groupLeft).Msg("attach session ended: no process left; its layers are released")
}

// reapply gives an adopted attach session its layers again: the previous
// daemon's programs went away with it. A session whose policy needs a
// layer this daemon cannot apply is stopped rather than left running
// under weaker rules.
func (s *Server) reapply(ctx context.Context, st session.Status, c *policy.Compiled) error {
	if c.Network.Policy == "" {
		// As package session reads it: no network policy is none, never
		// full network by omission.
		cc := *c
		cc.Network.Policy = policy.NetNone
		c = &cc
	}
	// A session attached without BPF-LSM was asked for the network-only
	// boundary (nothing else attaches it): its record says so by the
	// layers it got. One attached with BPF-LSM is refused here without it.
	networkOnly := !slices.Contains(st.Layers, session.LayerBPFLSM)
	plan, ls, err := s.enf.forAttach(c, planner.Options{NetworkOnly: networkOnly})
	if err != nil {
		return err
	}
	for _, w := range plan.Warnings {
		s.zl.Warn().Str("session", st.ID).Msg(w)
	}
	// The group, not the record, says which cgroup id the kernel reports.
	g, err := cgroup.OpenSession(s.opts.Cgroup, st.ID)
	if err != nil {
		return err
	}
	info := session.SessionInfo{ID: st.ID, CgroupPath: g.Path, CgroupID: g.CgroupID, Policy: c}
	for _, l := range ls {
		if _, err := l.Apply(ctx, info); err != nil {
			s.enf.release(ctx, g.CgroupID)
			return fmt.Errorf("apply %s: %w", l.Name(), err)
		}
	}
	s.work.Add(1)
	go s.watchAttached(st.ID, g.CgroupID)
	return nil
}

// pinSpec names a layer's pinned set, the map whose keys are the cgroup
// ids of the sessions the layer confines, the source its programs' records
// carry in the shared ring buffer and the layer their audit records name.
type pinSpec struct {
	layer, set, sessionsMap string
	source                  loader.Source
	audit                   audit.Layer
}

func fsPins() pinSpec {
	return pinSpec{layer: session.LayerBPFLSM, set: host.SetName(session.LayerBPFLSM), sessionsMap: "fs_sessions", source: loader.SourceFS, audit: audit.LayerBPFLSM}
}

func netPins() pinSpec {
	return pinSpec{layer: session.LayerNetwork, set: host.SetName(session.LayerNetwork), sessionsMap: "net_sessions", source: loader.SourceNet, audit: audit.LayerCgroupNet}
}

// pinnedSet is one layer's objects pinned by this daemon (gen) and the
// generations earlier daemons left (old), which keep enforcing until
// retirePinned has checked that every surviving session holds its rules
// in gen.
type pinnedSet struct {
	spec pinSpec
	set  loader.PinSet
	gen  loader.Generation
	old  []loader.Generation
}

func (e *enforcement) pinnedSet(layer string) *pinnedSet {
	for _, p := range e.pins {
		if p.spec.layer == layer {
			return p
		}
	}
	return nil
}

// removeSetDir removes the set's directory if no generation is left.
func (p *pinnedSet) removeSetDir() { os.Remove(p.set.Dir) }
