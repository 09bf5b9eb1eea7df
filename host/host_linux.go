//go:build linux

package host

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit/bpfring"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/egress"
	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// Options configure Open.
type Options struct {
	// Cgroup is where the sessions' groups are; the network programs
	// attach on their parent.
	Cgroup cgroup.Config
	// KernelBuffer is the size in bytes of the shared ring buffer (a
	// power of two); 0 means loader.DefaultRingSize.
	KernelBuffer int
	// ResolverUpstream is the DNS upstream (host:port) of the network
	// layer's resolvers; empty means /etc/resolv.conf. ResolverUpstreamList
	// is the same as one comma-separated string (an environment variable),
	// parsed here: an entry that is not host:port fails the network layer.
	ResolverUpstream     []string
	ResolverUpstreamList string
	// ResolverAnswered, when set, receives every answer of the network
	// layer's resolvers (session.NetworkConfig.OnAnswer; the daemon's
	// metrics). Nil: answers are not reported.
	ResolverAnswered func(egress.DNSAnswer)
	// Unavailable marks layers unavailable (planner.ForceUnavailableEnv).
	Unavailable map[string]bool
	// Pins, when set, says where the host keeps its objects pinned and
	// how (see the package comment); nil keeps them in this process only.
	Pins Pinning
	// Warn receives the layers' warnings (audit records that could not be
	// written, lost kernel events).
	Warn io.Writer
	// Timing, when set, is told when each layer is built.
	Timing *phasetime.Recorder
	// ROViewLinger and ROViewAfterFunc are the read-only view audit's
	// session.ROViewConfig Linger and AfterFunc: a host that serves one
	// session after another (the daemon) keeps its program attached for a
	// while after the last session that needed it.
	ROViewLinger    time.Duration
	ROViewAfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// Host owns the BPF objects that enforce sessions: the shared event ring
// buffer, the BPF-LSM filesystem layer, the cgroup network layer and the
// audit of the read-only view's refusals. A
// layer that could not be built is nil with the reason kept, which
// Capabilities hands to the planner.
type Host struct {
	ring   *bpfring.Ring
	fs     *session.FSLayer
	fsErr  error
	net    *session.NetworkLayer
	netErr error
	// roview reports the read-only view's EROFS refusals (run sessions
	// without BPF-LSM). It is attached only while this process has such a
	// session; a Cache keeps its program and maps pinned, unattached, for
	// the next standalone run to open instead of loading them.
	roview    *session.ROViewLayer
	roviewErr error
	// pins are what Pins pinned, by layer, and pinFailed why a layer
	// built is not pinned; pinErr is why the host could not pin at all.
	// mu guards them while Open builds layers side by side.
	mu        sync.Mutex
	pins      map[string]Pinned
	pinFailed map[string]error
	pinErr    error
	pinning   Pinning
	// ringReused is set when the ring's maps were opened from their pins.
	ringReused bool
}

// openRing opens the ring buffer: the pinned event maps when there are
// some to read again, new ones (then pinned) otherwise.
func (h *Host) openRing(opts Options) (*bpfring.Ring, error) {
	if h.pinErr != nil {
		return bpfring.Open(bpfring.Options{Size: opts.KernelBuffer, Warn: opts.Warn})
	}
	events, err := h.pinning.Events()
	if err != nil {
		h.pinFailed["events"] = err
	}
	if events != nil {
		r, err := bpfring.Open(bpfring.Options{Warn: opts.Warn, Maps: events})
		if err == nil {
			h.ringReused = true
			return r, nil
		}
		h.pinFailed["events"] = err
	}
	r, err := bpfring.Open(bpfring.Options{Size: opts.KernelBuffer, Warn: opts.Warn})
	if err != nil {
		return nil, err
	}
	if err := h.pinning.PinEvents(r.Maps()); err != nil {
		// The layers cannot be pinned to maps that are not.
		h.pinErr = fmt.Errorf("pin the event maps: %w", err)
	}
	return r, nil
}

// Open builds the BPF layers want names; the others are left out with
// planner.ErrNotProvided as their reason. It never fails: a layer that
// cannot be built is absent, and the planner decides what a session does
// without it. Close releases whatever was built.
func Open(opts Options, want planner.Want) *Host {
	h := &Host{fsErr: planner.ErrNotProvided, netErr: planner.ErrNotProvided, roviewErr: planner.ErrNotProvided,
		pins: map[string]Pinned{}, pinFailed: map[string]error{}}
	h.pinning = opts.Pins
	if !want.BPFLSM && !want.Network {
		h.pinning = nil
	}
	if opts.Pins != nil && (want.BPFLSM || want.Network) {
		h.pinErr = opts.Pins.Prepare(opts.KernelBuffer)
	} else {
		h.pinErr = ErrNotPinning
	}
	opts.Timing.Mark("host: pin directory")
	ring := func() (*bpfring.Ring, error) {
		if h.ring != nil {
			return h.ring, nil
		}
		r, err := h.openRing(opts)
		if err != nil {
			return nil, fmt.Errorf("open the kernel event ring buffer: %w", err)
		}
		h.ring = r
		return r, nil
	}
	if want.BPFLSM {
		h.fsErr = h.buildFS(opts, ring)
		opts.Timing.Mark("host: bpf-lsm")
	}
	// Only a session without BPF-LSM has a read-only view to audit.
	wantROView := want.ReadOnlyViewAudit && h.fs == nil
	if want.Network && wantROView {
		// The two layers share nothing but the ring (opened first) and
		// the pin bookkeeping (under h.mu): they are opened side by side.
		if _, err := ring(); err != nil {
			h.netErr, h.roviewErr = err, err
		} else {
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.roviewErr = h.buildROView(opts, ring)
			}()
			h.netErr = h.buildNet(opts, ring)
			<-done
		}
		opts.Timing.Mark("host: ring, network, read-only view audit")
	} else if want.Network {
		h.netErr = h.buildNet(opts, ring)
		opts.Timing.Mark("host: ring, network")
	} else if wantROView {
		h.roviewErr = h.buildROView(opts, ring)
		opts.Timing.Mark("host: read-only view audit")
	}
	if h.fs == nil && h.net == nil && h.roview == nil && h.ring != nil {
		h.ring.Close()
		h.ring = nil
	}
	return h
}

// buildFS loads the BPF-LSM filesystem programs (DESIGN §3: bpf among the
// active LSMs and a probe program loads and attaches). A kernel without
// BPF-LSM is a plain error; programs that did not load on a kernel that
// has it are a *planner.NotLoaded, which sessions are warned about.
func (h *Host) buildFS(opts Options, ring func() (*bpfring.Ring, error)) error {
	if opts.Unavailable[planner.LayerBPFLSM] {
		return planner.ErrForced
	}
	// Programs pinned in this boot (bpffs lives one) whose links are
	// still attached answer what the probe asks, whether this kernel runs
	// BPF-LSM programs: reopened, they spare every start the probe's
	// parse of the kernel's BTF, load, attach and detach (~20 ms of CPU).
	open := func(dir string) error {
		r, err := ring()
		if err != nil {
			return err
		}
		l, err := session.NewFSLayer(session.FSConfig{Events: r, Warn: opts.Warn, Pinned: dir})
		if err == nil {
			h.fs = l
		}
		return err
	}
	if h.pinnedSet(planner.LayerBPFLSM, 0) {
		if _, err := ring(); err == nil && h.reuse(planner.LayerBPFLSM, 0, open) {
			return nil
		}
	}
	probe := loader.ProbeBPFLSM
	// Not only under the lease: a refusal is the kernel's, whoever asks.
	if pc, ok := h.pinning.(probeCacher); ok {
		probe = pc.probeBPFLSM
	}
	if err := probe(); err != nil {
		return err
	}
	r, err := ring()
	if err != nil {
		return &planner.NotLoaded{Err: err}
	}
	cfg := session.FSConfig{Events: r, Warn: opts.Warn}
	l, err := session.NewFSLayer(cfg)
	if err != nil {
		return &planner.NotLoaded{Err: fmt.Errorf("the filesystem programs did not load: %w", err)}
	}
	h.fs = l
	h.pin(opts, planner.LayerBPFLSM, 0, l)
	return nil
}

func (h *Host) buildNet(opts Options, ring func() (*bpfring.Ring, error)) error {
	if opts.Unavailable[planner.LayerNetwork] {
		return planner.ErrForced
	}
	upstream := opts.ResolverUpstream
	if opts.ResolverUpstreamList != "" {
		var err error
		if upstream, err = parseUpstream(opts.ResolverUpstreamList); err != nil {
			return err
		}
	}
	parent, err := cgroup.ParentDir(opts.Cgroup)
	if err != nil {
		return err
	}
	r, err := ring()
	if err != nil {
		return err
	}
	cfg := session.NetworkConfig{Parent: parent, Upstream: upstream, OnAnswer: opts.ResolverAnswered, Events: r, Warn: opts.Warn}
	parentID, err := cgroupID(parent)
	if err != nil {
		return err
	}
	if h.reuse(planner.LayerNetwork, parentID, func(dir string) error {
		reuse := cfg
		reuse.Pinned = dir
		l, err := session.NewNetworkLayer(reuse)
		if err == nil {
			h.net = l
		}
		return err
	}) {
		return nil
	}
	l, err := session.NewNetworkLayer(cfg)
	if err != nil {
		return err
	}
	h.net = l
	h.pin(opts, planner.LayerNetwork, parentID, l)
	return nil
}

// buildROView loads the tracer of the read-only view's EROFS refusals. A
// kernel without raw tracepoints leaves it out; the planner warns.
func (h *Host) buildROView(opts Options, ring func() (*bpfring.Ring, error)) error {
	if opts.Unavailable[planner.LayerReadOnlyViewAudit] {
		return planner.ErrForced
	}
	r, err := ring()
	if err != nil {
		return err
	}
	cfg := session.ROViewConfig{Events: r, Warn: opts.Warn, Linger: opts.ROViewLinger, AfterFunc: opts.ROViewAfterFunc}
	// Only a Pinning that keeps unattached programs pins this layer: it
	// has no link, so a generation of it would hold nothing that confines.
	_, keeps := h.pinning.(keepsPrograms)
	if keeps && h.reuse(planner.LayerReadOnlyViewAudit, 0, func(dir string) error {
		reuse := cfg
		reuse.Pinned = dir
		l, err := session.NewROViewLayer(reuse)
		if err == nil {
			h.roview = l
		}
		return err
	}) {
		return nil
	}
	l, err := session.NewROViewLayer(cfg)
	if err != nil {
		return err
	}
	h.roview = l
	if keeps {
		h.pin(opts, planner.LayerReadOnlyViewAudit, 0, l)
	}
	return nil
}

// reuse opens layer from its pins with open when the host's Pinning has
// them (and the ring they report through was reopened too), and reports
// whether it did. Pins that do not open are discarded, for the layer to
// be loaded afresh and pinned in their place.
func (h *Host) reuse(layer string, parent uint64, open func(dir string) error) bool {
	h.mu.Lock()
	pinErr := h.pinErr
	h.mu.Unlock()
	if pinErr != nil || !h.ringReused {
		return false
	}
	dir := h.pinning.Reusable(layer, parent)
	if dir == "" {
		return false
	}
	if err := open(dir); err != nil {
		failed := fmt.Errorf("pinned %s programs not reused: %w", layer, err)
		derr := h.pinning.Discard(layer, parent)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.pinFailed[layer] = failed
		if derr != nil {
			h.pinFailed[layer] = derr
			h.pinErr = derr
		}
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pins[layer] = Pinned{Layer: layer, Reused: true, Set: loader.PinSet{Dir: dir}, Generation: loader.Generation{Dir: dir}}
	return true
}

// pinnedSet reports whether the host's Pinning has layer's objects pinned
// to reopen (before anything is opened to check them: see reuse).
func (h *Host) pinnedSet(layer string, parent uint64) bool {
	h.mu.Lock()
	pinErr := h.pinErr
	h.mu.Unlock()
	return pinErr == nil && h.pinning.Reusable(layer, parent) != ""
}

// cgroupID is the id of the cgroup at dir (its inode number).
func cgroupID(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	return st.Ino, nil
}

// parseUpstream parses a comma-separated list of host:port.
func parseUpstream(v string) ([]string, error) {
	var out []string
	for _, hp := range strings.Split(v, ",") {
		hp = strings.TrimSpace(hp)
		if _, _, err := net.SplitHostPort(hp); err != nil {
			return nil, fmt.Errorf("resolver upstream %q is not host:port: %w", hp, err)
		}
		out = append(out, hp)
	}
	return out, nil
}

// Capabilities completes caps (planner.Probe's) with the BPF layers this
// host holds for c: the filesystem programs only where they can enforce
// c's anchors (fsguard.CheckPolicy).
func (h *Host) Capabilities(c *policy.Compiled, caps planner.Capabilities) planner.Capabilities {
	caps.BPFLSM, caps.Network, caps.ReadOnlyViewAudit = h.fsErr, h.netErr, h.roviewErr
	if h.fs != nil {
		if err := fsguard.CheckPolicy(c); err != nil {
			caps.BPFLSM = &planner.NotLoaded{Err: fmt.Errorf("not for this policy: %w", err)}
		}
	}
	return caps
}

// Plan decides c's layers for verb on this host: planner.Decide with the
// kernel's capabilities (probe) completed by the host's.
func (h *Host) Plan(verb planner.Verb, c *policy.Compiled, probe planner.Capabilities, opts planner.Options) (*planner.Plan, error) {
	return planner.Decide(verb, c, h.Capabilities(c, probe), opts)
}

// Layers returns the host's layers plan applies, in order.
func (h *Host) Layers(plan *planner.Plan) []session.SessionLayer {
	var out []session.SessionLayer
	if plan.BPFLSM && h.fs != nil {
		out = append(out, h.fs)
	}
	if plan.Network && h.net != nil {
		out = append(out, h.net)
	}
	if plan.ReadOnlyViewAudit && h.roview != nil {
		out = append(out, h.roview)
	}
	return out
}

// FS, Network and ROView return the layers (nil when not built), Err why
// not.
func (h *Host) FS() *session.FSLayer           { return h.fs }
func (h *Host) Network() *session.NetworkLayer { return h.net }
func (h *Host) ROView() *session.ROViewLayer   { return h.roview }
func (h *Host) FSErr() error                   { return h.fsErr }
func (h *Host) NetworkErr() error              { return h.netErr }
func (h *Host) ROViewErr() error               { return h.roviewErr }
func (h *Host) Ring() *bpfring.Ring            { return h.ring }

// Close closes the layers and the ring in this process. What is pinned
// stays pinned (its Pinning says who removes it).
func (h *Host) Close() error {
	var errs []error
	if h.fs != nil {
		errs = append(errs, wrap("bpf-lsm layer", h.fs.Close()))
		h.fs = nil
	}
	if h.net != nil {
		errs = append(errs, wrap("network layer", h.net.Close()))
		h.net = nil
	}
	if h.roview != nil {
		errs = append(errs, wrap("read-only view audit", h.roview.Close()))
		h.roview = nil
	}
	if h.ring != nil {
		errs = append(errs, wrap("kernel event ring buffer", h.ring.Close()))
		h.ring = nil
	}
	if h.pinning != nil {
		errs = append(errs, wrap("pins", h.pinning.Release()))
		h.pinning = nil
	}
	return errors.Join(errs...)
}

// CloseForExit is Close for a process that exits right after, once no
// session of its layers is left (a standalone run's end). When every
// layer it built is pinned, and the event maps they report to, closing
// them would only drop this process's references to objects their pins
// keep, which its exit drops as well: CloseForExit leaves all of it to
// the exit (the ring's reader, ~0.2 ms to stop; the ring's mapping,
// ~0.4 ms to unmap while the process's other threads run; the layers'
// descriptors). The pins' lease goes with them: the exit releases it
// after the last thread of the process is gone, so the next supervisor to
// hold the pins never shares the ring with this one's reader, and the
// process that waits for this one finds it released. A link no pin holds
// (the read-only view audit's, attached only while a session runs) was
// detached at the session's end, and a detach still under way there
// finishes before the exit does. A layer that is not pinned (a pin
// failed, or the host pins nothing) is closed as Close does.
func (h *Host) CloseForExit() error {
	if !h.allPinned() {
		return h.Close()
	}
	return nil
}

// allPinned reports whether every layer the host built is pinned, with
// the event maps they report to.
func (h *Host) allPinned() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pinning == nil || h.pinErr != nil || len(h.pinFailed) > 0 {
		return false
	}
	for layer, built := range map[string]bool{
		planner.LayerBPFLSM: h.fs != nil, planner.LayerNetwork: h.net != nil, planner.LayerReadOnlyViewAudit: h.roview != nil,
	} {
		if _, pinned := h.pins[layer]; built && !pinned {
			return false
		}
	}
	return true
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// CloseRing closes the ring buffer alone, for an owner (the daemon) that
// closed or left to their pins the layers itself: what pinned programs
// report from then on waits in the pinned ring buffer.
func (h *Host) CloseRing() error {
	if h.ring == nil {
		return nil
	}
	err := h.ring.Close()
	h.ring = nil
	if h.pinning != nil {
		err = errors.Join(err, h.pinning.Release())
		h.pinning = nil
	}
	return wrap("kernel event ring buffer", err)
}
