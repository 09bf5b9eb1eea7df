//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/bpfring"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// enforcement holds the session layers the daemon builds once at start and
// applies to every session it creates or attaches (DESIGN §1: BPF is
// loaded once and serves every session). A layer that could not be built
// is nil with the reason kept: the sessions then get what package session
// falls back to (Landlock, an empty network namespace for network none),
// or are refused with that reason when nothing can enforce their policy.
type enforcement struct {
	net    *session.NetworkLayer
	netErr error
	fs     *session.FSLayer
	fsErr  error

	mu sync.Mutex
	// attached holds, per cgroup id, the teardowns of the layers applied to
	// an attach session: session.Attach leaves them applied (the session
	// outlives the request), so the daemon removes them when the session
	// ends.
	attached map[uint64][]teardown

	// pins are the pinned generations of the layers this daemon built
	// (see pinned), pinErr why nothing could be pinned.
	pins   []*pinnedSet
	pinErr error

	// ring is the ring buffer both layers report refusals in, nil when
	// it could not be opened (and no BPF layer was built).
	ring *bpfring.Ring
}

// buildEnforcement builds the layers. It never fails: a layer that cannot
// be built is logged at error level and left out.
func buildEnforcement(opts Options, zl zerolog.Logger, warn io.Writer) *enforcement {
	e := &enforcement{attached: map[uint64][]teardown{}}
	pinDir := opts.PinDir
	if pinDir == "" {
		pinDir = DefaultPinDir
	}
	e.pinErr = loader.EnsurePinDir(pinDir)
	if e.pinErr != nil {
		zl.Error().Err(e.pinErr).Str("pin_dir", pinDir).
			Msg("enforcement is NOT pinned: a crash or kill -9 of the daemon leaves attach sessions without their BPF rules until the next start applies them again")
	}
	ring, ringErr := bpfring.Open(bpfring.Options{Size: opts.KernelBuffer, Warn: warn})
	if ringErr != nil {
		ringErr = fmt.Errorf("open the kernel event ring buffer: %w", ringErr)
	} else {
		e.ring = ring
		zl.Info().Int("bytes", ring.Size()).Msg("kernel event ring buffer open")
	}
	switch {
	case opts.Unavailable[session.LayerNetwork]:
		e.netErr = errors.New("marked unavailable by " + session.ForceUnavailableEnv)
	case ringErr != nil:
		e.netErr = ringErr
	default:
		parent, err := cgroup.ParentDir(opts.Cgroup)
		if err == nil {
			err = e.pinned(pinDir, netPins(), zl, func() (err error) {
				e.net, err = session.NewNetworkLayer(session.NetworkConfig{Parent: parent, Upstream: opts.ResolverUpstream, Events: ring, Warn: warn})
				return err
			})
		}
		e.netErr = err
	}
	if e.netErr != nil {
		zl.Error().Str("layer", session.LayerNetwork).Err(e.netErr).
			Msg("cgroup network layer NOT built: network allowlists and attach with network rules are refused; network none falls back to an empty network namespace; loopback rules of full-network sessions are NOT enforced")
	} else {
		zl.Info().Str("layer", session.LayerNetwork).Msg("cgroup network layer built")
	}
	switch {
	case opts.Unavailable[session.LayerBPFLSM]:
		e.fsErr = errors.New("marked unavailable by " + session.ForceUnavailableEnv)
	case ringErr != nil:
		e.fsErr = ringErr
	default:
		e.fsErr = loader.ProbeBPFLSM()
		if e.fsErr == nil {
			err := e.pinned(pinDir, fsPins(), zl, func() (err error) {
				e.fs, err = session.NewFSLayer(session.FSConfig{Events: ring, Warn: warn})
				return err
			})
			if err != nil {
				e.fsErr = fmt.Errorf("BPF-LSM is usable but the filesystem programs did not load: %w", err)
			}
		}
	}
	if e.fsErr != nil {
		zl.Warn().Str("layer", session.LayerBPFLSM).Err(e.fsErr).
			Msg("BPF-LSM filesystem layer NOT built: run sessions use Landlock and the mount namespace; attach sessions get no filesystem rules (and are told so)")
	} else {
		zl.Info().Str("layer", session.LayerBPFLSM).Strs("hooks", e.fs.Hooks()).Msg("BPF-LSM filesystem layer built")
	}
	if e.fs == nil && e.net == nil && e.ring != nil {
		e.ring.Close()
		e.ring = nil
	}
	return e
}

// needsNetworkLayer mirrors the CLI: network full with every loopback
// service reachable is the only policy the cgroup programs add nothing to.
func needsNetworkLayer(c *policy.Compiled) bool {
	n := c.Network
	return !(n.Policy == policy.NetFull && (n.Loopback == policy.LoopbackAll || n.Loopback == ""))
}

// forSession returns the layers c needs and the warnings for what a
// missing layer leaves to a fallback. verb is "run" or "attach". A policy
// nothing can enforce gets no warning here: session.Run/Attach refuse it
// (exit 125), and the warning says why the daemon has no such layer.
func (e *enforcement) forSession(verb string, c *policy.Compiled) ([]session.SessionLayer, []string) {
	var out []session.SessionLayer
	var warnings []string
	if c.FilesystemRules && e.fs != nil {
		out = append(out, e.fs)
	}
	if needsNetworkLayer(c) {
		switch {
		case e.net != nil:
			out = append(out, e.net)
		case c.Network.Policy == policy.NetFull:
			warnings = append(warnings, fmt.Sprintf("cgroup network layer unavailable in the daemon (%v): network loopback = %q is NOT enforced; the session reaches every loopback service", e.netErr, c.Network.Loopback))
		case verb == "run" && (c.Network.Policy == policy.NetNone || c.Network.Policy == ""):
			warnings = append(warnings, fmt.Sprintf("cgroup network layer unavailable in the daemon (%v): network none is enforced with an empty network namespace instead, and refusals are not audited", e.netErr))
		default:
			warnings = append(warnings, fmt.Sprintf("cgroup network layer unavailable in the daemon (%v)", e.netErr))
		}
	}
	return out, warnings
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

// forAttach is forSession with every layer recorded for release.
func (e *enforcement) forAttach(c *policy.Compiled) ([]session.SessionLayer, []string) {
	ls, warnings := e.forSession("attach", c)
	for i, l := range ls {
		ls[i] = recording{SessionLayer: l, e: e}
	}
	return ls, warnings
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
	if e.ring != nil {
		// What the pinned programs report from now on stays in the pinned
		// ring buffer, counted by the next daemon (reportUnaudited).
		errs = append(errs, e.ring.Close())
	}
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
	events := filepath.Join(dir, id, "cgroup.events")
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := os.ReadFile(events)
		switch {
		case errors.Is(err, os.ErrNotExist):
			s.endAttached(id, cgID, false)
			return
		case err == nil && strings.Contains(string(b), "populated 0"):
			s.endAttached(id, cgID, true)
			return
		case err != nil:
			// Transient (or a bug): keep the rules, keep watching.
			s.zl.Warn().Str("session", id).Err(err).Msg("read cgroup.events")
		}
		select {
		case <-s.stopping:
			// The daemon is stopping: the layers close with it; the
			// session is adopted, and its rules applied again, by the
			// next daemon.
			return
		case <-tick.C:
		}
	}
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
	ls, warnings := s.enf.forAttach(c)
	for _, w := range warnings {
		s.zl.Warn().Str("session", st.ID).Msg(w)
	}
	if c.Network.Policy != policy.NetFull && s.enf.net == nil {
		return fmt.Errorf("its network policy %q needs the cgroup network layer: %w", c.Network.Policy, s.enf.netErr)
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
	return pinSpec{layer: session.LayerBPFLSM, set: "fs", sessionsMap: "fs_sessions", source: loader.SourceFS, audit: audit.LayerBPFLSM}
}

func netPins() pinSpec {
	return pinSpec{layer: session.LayerNetwork, set: "net", sessionsMap: "net_sessions", source: loader.SourceNet, audit: audit.LayerCgroupNet}
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

// pinned runs build, which loads one layer, and pins the links and maps
// it loaded as a new generation of spec's set. The layers (package
// session) own their objects and know nothing of pins, so what to pin is
// told by the BPF descriptors this process gained during build. When
// pinning is off or fails the layer works unpinned, which is logged at
// error level: it enforces as long as the daemon lives.
func (e *enforcement) pinned(pinDir string, spec pinSpec, zl zerolog.Logger, build func() error) error {
	if e.pinErr != nil {
		return build()
	}
	set := loader.PinSet{Dir: filepath.Join(pinDir, spec.set)}
	old, listErr := set.Generations()
	before, heldErr := loader.Held()
	if err := build(); err != nil {
		return err
	}
	fail := func(err error) error {
		zl.Error().Str("layer", spec.layer).Err(err).
			Msg("layer NOT pinned: a crash or kill -9 of the daemon takes its rules away from attach sessions until the next start")
		return nil
	}
	if err := errors.Join(listErr, heldErr); err != nil {
		return fail(err)
	}
	after, err := loader.Held()
	if err != nil {
		return fail(err)
	}
	objs := after.Since(before)
	if len(objs.Links) == 0 {
		return fail(errors.New("the layer holds no BPF link of its own to pin"))
	}
	// The shared event maps were created before the layer: they are
	// pinned with each layer that reports through them.
	if e.ring != nil {
		ids, err := e.ring.Maps().IDs()
		if err != nil {
			return fail(err)
		}
		for _, id := range ids {
			objs.Maps[id] = true
		}
	}
	gen, err := set.Pin(objs)
	if err != nil {
		return fail(err)
	}
	e.pins = append(e.pins, &pinnedSet{spec: spec, set: set, gen: gen, old: old})
	zl.Info().Str("layer", spec.layer).Str("pins", gen.Dir).Int("links", len(objs.Links)).Int("maps", len(objs.Maps)).
		Int("older_generations", len(old)).Msg("layer pinned")
	return nil
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
