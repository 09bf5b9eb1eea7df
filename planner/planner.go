package planner

import (
	"errors"
	"fmt"

	"github.com/openoxide/oxsupervise/policy"
)

// Layer names, as they appear in messages, registry entries and audit
// records (package session re-exports them).
const (
	LayerCgroup   = "cgroup"
	LayerMountNS  = "mount-namespace"
	LayerLandlock = "landlock"
	LayerBPFLSM   = "bpf-lsm"
	LayerNetwork  = "network"
	// LayerNetNS is the empty network namespace that enforces network
	// "none" in run when there is no cgroup network layer.
	LayerNetNS = "network-namespace"
	// LayerSeccomp is run's launcher's syscall filter (TIOCSTI, io_uring,
	// clone3, socket families).
	LayerSeccomp = "seccomp"
	// LayerReadOnlyViewAudit reports the EROFS refusals of the read-only
	// view (bpf/roview.c), which no LSM sees.
	LayerReadOnlyViewAudit = "read-only-view-audit"
)

// Verb is what the session is created by.
type Verb string

const (
	// Run starts a new command inside the boundary.
	Run Verb = "run"
	// Attach moves a running process tree into it: no mount or network
	// namespace can be given to a process that already runs.
	Attach Verb = "attach"
)

// Capabilities are what this supervisor can enforce with, each nil when
// usable and otherwise why not. Probe measures the kernel's; the
// enforcement host fills BPFLSM and Network with what it loaded.
type Capabilities struct {
	// Cgroup2 is the cgroup v2 hierarchy sessions are created in.
	Cgroup2 error
	// MountNS is a private mount namespace for run's launcher.
	MountNS error
	// Landlock is the Landlock LSM; LandlockABI its ABI version when
	// usable and LandlockAudits whether that ABI reports refusals to the
	// kernel audit log.
	Landlock       error
	LandlockABI    int
	LandlockAudits bool
	// BPFLSM is the BPF-LSM filesystem layer: nil when the host holds its
	// programs for this session's policy. A *NotLoaded error means the
	// kernel supports it but the programs were not built (the plan warns);
	// any other error means the kernel lacks it (it is left out quietly:
	// `oxsupervise doctor` explains).
	BPFLSM error
	// Network is the cgroup BPF network layer: nil when the host holds
	// its programs.
	Network error
	// NetNS is an empty network namespace for run's launcher.
	NetNS error
	// ReadOnlyViewAudit is the tracer that reports the read-only view's
	// EROFS refusals (bpf/roview.c): nil when the host holds it.
	ReadOnlyViewAudit error
}

// NotLoaded is the reason for a layer the kernel supports but the host did
// not build for a session: its programs failed to load, or they cannot
// enforce this policy. Unlike a missing kernel feature, it is warned about.
type NotLoaded struct{ Err error }

func (e *NotLoaded) Error() string { return e.Err.Error() }

func (e *NotLoaded) Unwrap() error { return e.Err }

// BoundaryError means a layer the policy needs cannot be built; nothing of
// the command runs (exit 125 naming Layer).
type BoundaryError struct {
	Layer string
	Err   error
}

func (e *BoundaryError) Error() string {
	return fmt.Sprintf("layer %s cannot be built: %v", e.Layer, e.Err)
}

func (e *BoundaryError) Unwrap() error { return e.Err }

// Need says what a session does without a layer.
type Need uint8

const (
	// Absent: the session does not get the layer.
	Absent Need = iota
	// Required: the session does not start without it.
	Required
	// Optional: the layer is applied when it builds; when it does not,
	// the session goes on under the others and the plan's Fallback
	// warning is printed.
	Optional
)

func (n Need) String() string {
	switch n {
	case Required:
		return "required"
	case Optional:
		return "optional"
	}
	return "absent"
}

// Plan is the set of layers one session gets.
type Plan struct {
	Verb Verb
	// BPFLSM applies the host's filesystem programs.
	BPFLSM bool
	// Landlock is Required when it is the filesystem layer, Optional when
	// it is stacked on BPF-LSM as defence in depth: a ruleset the ABI
	// cannot honour then only costs LandlockFallback's warning.
	Landlock         Need
	LandlockABI      int
	LandlockFallback string
	// MountNS builds run's private mount namespace.
	MountNS bool
	// Seccomp is run's launcher's syscall filter (TIOCSTI, io_uring, and
	// the socket families of SeccompSockets), installed with its log flag,
	// and its unlogged clone3 filter (launcher/seccomp_linux.go).
	Seccomp bool
	// SeccompSockets has the launcher's seccomp filter refuse the socket
	// families and raw sockets the network programs cannot judge: where
	// no BPF-LSM socket_create program refuses (and audits) them first.
	SeccompSockets bool
	// QuarantineNames watches the writable roots for protected names the
	// session creates (no BPF-LSM refuses them) and moves them out
	// (package quarantine).
	QuarantineNames bool
	// ReadOnlyView makes every mount of that namespace read-only outside
	// the writable roots: without BPF-LSM nothing else refuses chmod,
	// chown or utimes there (Landlock has no right for them).
	ReadOnlyView bool
	// ReadOnlyViewAudit applies the host's tracer of the view's EROFS
	// refusals, which no LSM sees. It is optional: without it the view
	// still refuses, and ReadOnlyViewUnaudited is warned.
	ReadOnlyViewAudit bool
	// Network applies the host's cgroup network programs.
	Network bool
	// NetNS starts run's command in an empty network namespace (network
	// "none" without the network layer); LoopbackUp brings its lo up so
	// the session reaches its own listeners (loopback "session").
	NetNS      bool
	LoopbackUp bool
	// KernelAudit follows the kernel audit feed for the session's
	// refusals: a layer of the plan reports them nowhere else (Landlock at
	// the audit ABI, seccomp's logged errno actions). Every layer of the
	// BPF-LSM and network programs reports through the ring buffer.
	KernelAudit bool
	// Warnings say what the session does not get and what replaces it,
	// one sentence each, without a prefix.
	Warnings []string
}

// Want is which BPF layers a policy would use: the host loads only those.
// ReadOnlyViewAudit is wanted where BPF-LSM may turn out not to be the
// filesystem layer; the host builds it only when its BPF-LSM layer is not
// built.
type Want struct {
	BPFLSM            bool
	Network           bool
	ReadOnlyViewAudit bool
}

// Wants returns the BPF layers c would use where the kernel has them.
func Wants(c *policy.Compiled) Want {
	return Want{BPFLSM: c.FilesystemRules, Network: needsNetwork(c.Network), ReadOnlyViewAudit: c.FilesystemRules}
}

// ReadOnlyViewUnaudited is the warning of a session whose read-only view
// has no tracer (%v: why).
const ReadOnlyViewUnaudited = "EROFS refusals are not audited (%v): writes, creations and metadata changes outside the writable roots are still refused by the read-only mount view, but leave no audit record"

// needsNetwork: network full with every loopback service reachable is the
// only policy the cgroup programs add nothing to. A zero Policy is none
// (a hand-built Compiled must not get full network by omission).
func needsNetwork(n policy.Network) bool {
	return !(n.Policy == policy.NetFull && (n.Loopback == policy.LoopbackAll || n.Loopback == ""))
}

// ErrNotProvided is the reason recorded for a BPF layer a supervisor was
// not given (a caller of package session that builds no host).
var ErrNotProvided = errors.New("not provided by this supervisor")

// Options are what the caller asks of one session beyond its policy.
type Options struct {
	// NetworkOnly accepts, for attach, a boundary of the policy's network
	// rules and cgroup containment alone when no BPF-LSM can enforce its
	// filesystem rules (attach --network-only). Without it such an attach
	// is refused: a boundary weaker than the policy is never the default.
	NetworkOnly bool
}

// Decide returns the layers c gets on a machine with caps, or a
// *BoundaryError naming the first layer c needs that caps cannot give.
func Decide(verb Verb, c *policy.Compiled, caps Capabilities, opts Options) (*Plan, error) {
	if c == nil {
		return nil, errors.New("no policy")
	}
	p := &Plan{Verb: verb}
	if caps.Cgroup2 != nil {
		return nil, &BoundaryError{LayerCgroup, caps.Cgroup2}
	}
	if c.FilesystemRules {
		p.BPFLSM = caps.BPFLSM == nil
		var nl *NotLoaded
		if errors.As(caps.BPFLSM, &nl) {
			p.Warnings = append(p.Warnings, fmt.Sprintf("BPF-LSM is usable but %v", nl.Err))
		}
	}
	var err error
	if verb == Attach {
		err = decideAttach(p, c, caps, opts)
	} else {
		err = decideRun(p, c, caps)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// NetworkOnlyFlag is the attach flag that sets Options.NetworkOnly, named
// in the refusal it overrides.
const NetworkOnlyFlag = "--network-only"

// AttachNeedsBPFLSM is the reason an attach is refused when its policy has
// filesystem rules and no BPF-LSM layer can enforce them: Landlock and a
// mount namespace can only be entered by a process itself, so for a
// process that already runs BPF-LSM is the only filesystem layer. Its
// message says what is missing and the flag that accepts the weaker
// boundary; Why (the host's or the kernel's reason, in the loader's
// words) is left out of it and kept for the caller to find the remedy
// from (package doctor).
type AttachNeedsBPFLSM struct {
	Mode policy.Mode
	Why  error
}

func (e *AttachNeedsBPFLSM) Error() string {
	missing := "BPF-LSM is not usable on this machine"
	var nl *NotLoaded
	if errors.As(e.Why, &nl) {
		// The kernel has it; what stops it is ours to say (an anchor it
		// cannot hold), and the remedy is in the policy, not the kernel.
		missing = fmt.Sprintf("BPF-LSM is usable here but %v", nl.Err)
	}
	return fmt.Sprintf("the policy's filesystem rules (mode %s) need BPF-LSM to hold a process that is already running "+
		"(Landlock and mount namespaces can only be entered by a process itself), and %s; "+
		"to confine it with the policy's network rules and cgroup containment only, its filesystem rules NOT enforced, attach with %s",
		e.Mode, missing, NetworkOnlyFlag)
}

func (e *AttachNeedsBPFLSM) Unwrap() error { return e.Why }

// AttachNetworkOnly is the warning of an attach session that was asked
// for the network-only boundary and gets it.
const AttachNetworkOnly = "filesystem rules for attach need BPF-LSM, which is not usable here: as asked (" + NetworkOnlyFlag + "), this session does NOT enforce the policy's filesystem rules, only its network rules and cgroup containment"

// decideAttach: a running process gets only what is keyed by its cgroup.
// Its filesystem rules need BPF-LSM (Landlock and namespaces can only be
// entered by a process itself): lacking it, attach is refused unless the
// caller asked for the network-only boundary by name. Its network rules
// need the cgroup programs: there is no namespace to fall back on.
func decideAttach(p *Plan, c *policy.Compiled, caps Capabilities, opts Options) error {
	if c.FilesystemRules && !p.BPFLSM {
		if !opts.NetworkOnly {
			return &BoundaryError{LayerBPFLSM, &AttachNeedsBPFLSM{Mode: c.Mode, Why: caps.BPFLSM}}
		}
		p.Warnings = append(p.Warnings, AttachNetworkOnly)
	}
	if !needsNetwork(c.Network) {
		return nil
	}
	if caps.Network == nil {
		p.Network = true
		return nil
	}
	if c.Network.Policy == policy.NetFull {
		p.Warnings = append(p.Warnings, loopbackUnenforced(c, caps.Network))
		return nil
	}
	return &BoundaryError{LayerNetwork, fmt.Errorf("network policy %q needs the cgroup network layer to confine a running process (%v); attach with --net full to get cgroup containment only", netPolicy(c), caps.Network)}
}

func decideRun(p *Plan, c *policy.Compiled, caps Capabilities) error {
	if caps.MountNS != nil {
		return &BoundaryError{LayerMountNS, caps.MountNS}
	}
	switch {
	case caps.Landlock != nil:
		if c.FilesystemRules && !p.BPFLSM {
			return &BoundaryError{LayerLandlock, fmt.Errorf("%v; no other filesystem layer either (bpf-lsm: %v)", caps.Landlock, caps.BPFLSM)}
		}
		if c.Mode != policy.ModeFullAccess {
			p.Warnings = append(p.Warnings, fmt.Sprintf("landlock unavailable (%v): no signal or abstract-socket scoping", caps.Landlock))
		}
	case p.BPFLSM && !caps.LandlockAudits:
		// Landlock comes before bpf in every kernel's LSM order, so a
		// refusal both layers would make is Landlock's; below the audit
		// ABI the kernel does not report it, and nothing would. BPF-LSM
		// enforces (and reports) the whole policy alone.
		p.Warnings = append(p.Warnings, fmt.Sprintf("landlock not stacked on BPF-LSM: ABI %d cannot report refusals to audit (needs the audit ABI)", caps.LandlockABI))
	case p.BPFLSM:
		p.Landlock, p.LandlockABI = Optional, caps.LandlockABI
		p.LandlockFallback = "landlock not stacked on BPF-LSM: %v"
	default:
		p.Landlock, p.LandlockABI = Required, caps.LandlockABI
	}
	p.MountNS = true
	// The launcher always installs its filter (TIOCSTI, io_uring and clone3 are
	// refused whichever filesystem layer runs).
	p.Seccomp = true
	p.KernelAudit = p.Seccomp || (p.Landlock != Absent && caps.LandlockAudits)
	p.ReadOnlyView = c.FilesystemRules && !p.BPFLSM
	p.SeccompSockets = SeccompSockets(c, p.BPFLSM)
	if p.ReadOnlyView {
		// Audit is observability, not the boundary: fail open, loudly.
		p.ReadOnlyViewAudit = caps.ReadOnlyViewAudit == nil
		if !p.ReadOnlyViewAudit {
			p.Warnings = append(p.Warnings, fmt.Sprintf(ReadOnlyViewUnaudited, caps.ReadOnlyViewAudit))
		}
	}
	if r, ok := c.Requires(policy.RequireBPFLSM); ok && c.FilesystemRules && !p.BPFLSM {
		return &BoundaryError{LayerBPFLSM, &RequiresBPFLSM{Source: r.Source, Why: caps.BPFLSM}}
	}
	if c.FilesystemRules && len(c.ProtectedPatterns) > 0 && len(c.WritableRoots) > 0 && !p.BPFLSM {
		// Landlock and bind mounts only protect inodes that exist now, and
		// oxsupervise never creates placeholders on the host: a protected
		// name created during the session (git init, a first .claude/) is
		// moved out when it appears (package quarantine), not refused.
		p.QuarantineNames = true
		p.Warnings = append(p.Warnings, "without BPF-LSM, protected names created during the session (a new .git/hooks, a first .claude/) are not refused: each is moved to quarantine when the session makes it, and none is left when it ends")
	}
	if c.Mode != policy.ModeFullAccess && !p.BPFLSM {
		// Landlock (ABI <= 7) has no right for connect(2) on a pathname
		// socket and a network namespace does not cover AF_UNIX. BPF-LSM
		// judges both kinds of peer (bpf/fs.c by the socket's inode,
		// bpf/unix.c abstract ones by the session that created them).
		p.Warnings = append(p.Warnings, "connections to pathname unix sockets outside writable roots are NOT blocked; only the well-known ones (systemd, D-Bus, docker, podman, ssh/gpg agents) are hidden and abstract sockets scoped")
	}
	return decideRunNetwork(p, c, caps)
}

// decideRunNetwork: the cgroup network layer owns the network policy when
// there is one. Without it only "none" can be honoured, with an empty
// network namespace; an allowlist cannot be honoured at all, and running
// it with full network would be a silently weaker boundary, so it is
// refused.
func decideRunNetwork(p *Plan, c *policy.Compiled, caps Capabilities) error {
	if !needsNetwork(c.Network) {
		return nil
	}
	if caps.Network == nil {
		p.Network = true
		return nil
	}
	switch netPolicy(c) {
	case policy.NetFull:
		p.Warnings = append(p.Warnings, loopbackUnenforced(c, caps.Network))
		return nil
	case policy.NetNone:
	default:
		return &BoundaryError{LayerNetwork, fmt.Errorf("network policy %q needs the cgroup network layer (%v); use --net none or --net full", netPolicy(c), caps.Network)}
	}
	if caps.NetNS != nil {
		return &BoundaryError{LayerNetNS, caps.NetNS}
	}
	p.NetNS = true
	p.LoopbackUp = c.Network.Loopback != policy.LoopbackNone
	p.Warnings = append(p.Warnings, fmt.Sprintf("cgroup network layer unavailable (%v): network none is enforced with an empty network namespace instead, and its refusals are not audited", caps.Network))
	if c.Network.Loopback == policy.LoopbackAll {
		p.Warnings = append(p.Warnings, "network none without the cgroup network layer: the session has its own loopback; the host's loopback services (loopback = \"all\") are NOT reachable")
	}
	return nil
}

// SeccompSockets is Plan.SeccompSockets for a session of policy c whose
// filesystem layer is BPF-LSM or not: the seccomp filter refuses the
// socket families the network programs cannot judge unless network is
// full, or BPF-LSM's socket_create refuses (and audits) them first. A
// nested session, which has its parent's layers, asks it with its own
// policy.
func SeccompSockets(c *policy.Compiled, bpflsm bool) bool {
	return netPolicy(c) != policy.NetFull && !bpflsm
}

// netPolicy reads a zero Policy as none.
func netPolicy(c *policy.Compiled) policy.NetPolicy {
	if c.Network.Policy == "" {
		return policy.NetNone
	}
	return c.Network.Policy
}

func loopbackUnenforced(c *policy.Compiled, why error) string {
	return fmt.Sprintf("cgroup network layer unavailable (%v): network loopback = %q is NOT enforced; the session reaches every loopback service", why, c.Network.Loopback)
}

// RequiresBPFLSM is the reason a session is refused under sandbox.require
// = ["bpf-lsm"] on a machine where this supervisor has no BPF-LSM layer.
// Like AttachNeedsBPFLSM, its message says what is missing and Why (the
// loader's words) is kept for the caller to find the machine's remedy
// from (package doctor, BPFLSMRemedy).
type RequiresBPFLSM struct {
	// Source is where the requirement was set (file:line:col).
	Source string
	Why    error
}

func (e *RequiresBPFLSM) Error() string {
	missing := "this machine cannot give it"
	var nl *NotLoaded
	switch {
	case errors.Is(e.Why, ErrForced):
		missing = fmt.Sprintf("BPF-LSM is %v", e.Why)
	case errors.As(e.Why, &nl):
		missing = fmt.Sprintf("BPF-LSM is usable here but %v", nl.Err)
	case e.Why == nil:
		missing = "BPF-LSM is usable here, but this supervisor did not load it"
	}
	return fmt.Sprintf("the policy requires BPF-LSM (sandbox.require, %s), which refuses protected names when they are created, and %s", e.Source, missing)
}

func (e *RequiresBPFLSM) Unwrap() error { return e.Why }
