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
}

// buildEnforcement builds the layers. It never fails: a layer that cannot
// be built is logged at error level and left out.
func buildEnforcement(opts Options, zl zerolog.Logger, warn io.Writer) *enforcement {
	e := &enforcement{attached: map[uint64][]teardown{}}
	switch {
	case opts.Unavailable[session.LayerNetwork]:
		e.netErr = errors.New("marked unavailable by " + session.ForceUnavailableEnv)
	default:
		parent, err := cgroup.ParentDir(opts.Cgroup)
		if err == nil {
			e.net, err = session.NewNetworkLayer(session.NetworkConfig{Parent: parent, Upstream: opts.ResolverUpstream, Warn: warn})
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
	default:
		e.fsErr = loader.ProbeBPFLSM()
		if e.fsErr == nil {
			var err error
			if e.fs, err = session.NewFSLayer(session.FSConfig{Warn: warn}); err != nil {
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

// close detaches every layer. Sessions still running lose those rules.
func (e *enforcement) close() error {
	var errs []error
	if e.fs != nil {
		errs = append(errs, e.fs.Close())
	}
	if e.net != nil {
		errs = append(errs, e.net.Close())
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
