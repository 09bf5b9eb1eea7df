package session

import (
	"context"
	"os"
	"sync"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
)

// Layer names, as they appear in messages, registry entries and audit
// records (package planner defines them).
const (
	LayerCgroup   = planner.LayerCgroup
	LayerMountNS  = planner.LayerMountNS
	LayerLandlock = planner.LayerLandlock
	LayerBPFLSM   = planner.LayerBPFLSM
	LayerNetwork  = planner.LayerNetwork
	LayerNetNS    = planner.LayerNetNS
	LayerSeccomp  = planner.LayerSeccomp
	// LayerReadOnlyViewAudit is ROViewLayer.
	LayerReadOnlyViewAudit = planner.LayerReadOnlyViewAudit
)

// ForceUnavailableEnv names the environment variable that marks layers as
// unavailable (see planner.ForceUnavailableEnv).
const ForceUnavailableEnv = planner.ForceUnavailableEnv

// ParseUnavailable parses the value of ForceUnavailableEnv.
func ParseUnavailable(v string) map[string]bool { return planner.ParseUnavailable(v) }

// BoundaryError means a layer the policy needs could not be built; nothing
// of the command ran.
type BoundaryError = planner.BoundaryError

// ExecError means the boundary was built but the command could not be
// executed (not found, not executable); Code is the shell convention
// (127 not found, 126 otherwise).
type ExecError struct {
	Code int
	Err  error
}

func (e *ExecError) Error() string { return e.Err.Error() }

func (e *ExecError) Unwrap() error { return e.Err }

// SessionInfo is what a SessionLayer needs to know about a session.
type SessionInfo struct {
	ID         string
	CgroupPath string
	// CgroupID is what bpf_get_current_cgroup_id returns inside the
	// session: the key of per-session BPF map entries.
	CgroupID uint64
	Policy   *policy.Compiled
	// Audit is the session's audit log, opened once by whoever builds the
	// session (Run; the caller of Attach through AttachOptions.Audit) and
	// shared by every layer, which writes to it but does not close it. A
	// layer given none opens Policy.Audit.Path itself and closes it when
	// the session ends.
	Audit *audit.FileSink
	// PrivateShm is run's private /dev/shm (launcher.NewPrivateShm) when
	// the session may write it, nil otherwise: a tmpfs mounted only in
	// the session's mount namespace, which no path of the policy names.
	// The BPF-LSM layer lets the session write below its root.
	PrivateShm *os.File
	// Created, when set, hears of every protected entry a layer let the
	// session create on the condition that it is checked when the session
	// ends (policy.ProtectedPattern.CheckedAtEnd: git's .git files): Run's
	// check at the end (quarantine.StartReported). A layer given none
	// refuses such entries like every protected one.
	Created CreatedEntries
}

// CreatedEntries receives the entries of SessionInfo.Created.
type CreatedEntries interface {
	// Created reports one entry, by its path in the supervisor's view.
	Created(path string)
	// Incomplete says some reports may be missing, and why.
	Incomplete(why string)
}

// SessionLayer is an enforcement layer applied to the session from the
// outside, keyed by its cgroup: BPF-LSM filesystem rules and cgroup BPF
// network rules. Run and Attach apply every layer after the session group
// exists and before any process enters it; a layer that fails stops the
// session from starting (exit 125 naming Name). Landlock and the mount
// namespace are not SessionLayers: they can only be built from inside, by
// the launcher.
type SessionLayer interface {
	Name() string
	// Apply installs the layer for s. The returned teardown (may be nil)
	// is called when a run session ends; attach sessions outlive the
	// command, so their layers must persist on their own (pinned maps)
	// and are removed by the daemon or `stop`.
	Apply(ctx context.Context, s SessionInfo) (teardown func(context.Context) error, err error)
}

// applyLayers applies layers in order; on failure it tears down those
// already applied and returns a *BoundaryError. The returned function
// tears them all down, side by side: the layers share nothing but the
// ring buffer whose reports each of them drains first, a round trip to
// its reader that one layer need not wait out before the next starts
// its own.
func applyLayers(ctx context.Context, layers []SessionLayer, s SessionInfo) (func(context.Context), error) {
	var teardowns []func(context.Context) error
	undo := func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, td := range teardowns {
			wg.Go(func() { td(ctx) })
		}
		wg.Wait()
	}
	for _, l := range layers {
		td, err := l.Apply(ctx, s)
		if err != nil {
			undo(ctx)
			return nil, &BoundaryError{Layer: l.Name(), Err: err}
		}
		if td != nil {
			teardowns = append(teardowns, td)
		}
	}
	return undo, nil
}

// externalCapabilities completes caps with the BPF layers a caller handed
// over as SessionLayers, for a Run or Attach given no Plan: a layer that
// was not handed over is not provided, whatever the kernel could load.
func externalCapabilities(caps planner.Capabilities, layers []SessionLayer) planner.Capabilities {
	for _, l := range layers {
		switch l.Name() {
		case LayerBPFLSM:
			caps.BPFLSM = nil
		case LayerNetwork:
			caps.Network = nil
		case LayerReadOnlyViewAudit:
			caps.ReadOnlyViewAudit = nil
		}
	}
	return caps
}
