package session

import (
	"io"
	"os"
	"sync"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/kernelaudit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
)

// The inputs and results of the package's verbs, one definition for every
// OS (Run, Attach, List and the launcher exist on Linux only; elsewhere they
// return an error saying so).

// RunOptions are the inputs of Run.
type RunOptions struct {
	// Timing, when set, is told when each phase of the session's start
	// and end is done (OXSUPERVISE_DEBUG_TIMING).
	Timing *phasetime.Recorder
	Policy *policy.Compiled
	// Argv is the command; Argv[0] is looked up in the scrubbed PATH.
	Argv []string
	// Env is the caller's environment; Run scrubs it per Policy.Env.
	Env []string
	// SessionEnv are variables the supervisor sets for the session after
	// the scrub, beside SessionEnv's own (the nested-session socket).
	SessionEnv []string
	// Dir is the working directory of the command.
	Dir string
	// UID, GID and Groups are the user the command runs as.
	UID, GID int
	Groups   []int

	Stdin, Stdout, Stderr *os.File
	// Warn receives warnings (one line each); nil discards them.
	Warn io.Writer
	// Unavailable marks layers as unavailable (see ForceUnavailableEnv).
	Unavailable map[string]bool
	// QuarantineDir receives protected entries a session creates on the
	// Landlock path; "" means quarantine.DefaultDir.
	QuarantineDir string
	// SelfExe is a binary that is its own launcher (LauncherVerb), such
	// as a test binary; "" means the launcher findLauncher decides.
	SelfExe string
	Cgroup  cgroup.Config
	// Mounts, when set, are the supervisor's mounts (/proc/self/mountinfo)
	// as its caller read them at its start, for the mount plan; nil: Run
	// reads them. A standalone run reads the table once, for its cgroup
	// mount and the plan (~0.25 ms a read), a few milliseconds before the
	// plan is bound: the launcher mounts by that plan a few milliseconds
	// after it anyway, so what a mount made in between misses is the same.
	Mounts   []mountinfo.Mount
	Registry Registry
	// Layers are applied to the session cgroup while the launcher builds
	// its mount namespace (cgroup network programs), except those whose
	// rules would refuse the launcher's mounts (BPF-LSM, FSLayer): those
	// after it is built. The launcher execs only once all are applied.
	Layers []SessionLayer
	// Plan is the session's layers as package planner decided them, and
	// Layers must hold the BPF layers it names. Without it Run decides
	// from the kernel's capabilities and the Layers given.
	Plan *planner.Plan
	// OnStart, when set, is called once with the session's identity after
	// its cgroup exists and the layers applied before the launch are in
	// place, and before the command's first instruction: how a
	// supervisor (the daemon) learns the id of the session it waits for.
	OnStart func(SessionInfo)
	// Settled, when set, is called once with what Run returns as soon as
	// the session has settled: its processes are gone, its group and
	// registry entry removed, and every record of it (session_stop last)
	// is in the audit log, for every reader to see; the sync of
	// session_stop to the disk runs meanwhile. What is left of Run then
	// (that sync, releasing the kernel audit feed and the audit sink) is
	// nothing the exit status waits for: a supervisor that outlives the
	// session (the daemon) answers its client here. Not called when Run
	// fails before it launched the command: then nothing was started to
	// settle.
	Settled func(code int, err error)
	// ExitAfter says the process exits as soon as Run returns (a
	// standalone run): what its exit undoes anyway (the launcher's signal
	// relay) Run does not undo first.
	ExitAfter bool
	// BeforeExit, when set, is where Run leaves what it need not finish
	// before it returns but must before the process exits: closing the
	// session's audit sink, which waits for the sync of session_stop (a
	// journal commit, ~1-2 ms) while the caller ends the rest (closes its
	// host). The caller waits for it before it exits; what fails is said
	// on Warn. Nil: Run does that before it returns.
	BeforeExit *sync.WaitGroup
	// Slots, when set, may hand Run a session slot made ahead (Slot): its
	// group and launcher instead of new ones, when it serves the session.
	Slots Slots
	// KernelAudit, when set, is the supervisor's shared kernel audit
	// reader (the daemon's, opened once for all its sessions): the
	// session subscribes to it instead of opening a reader of its own
	// (0.2-6 ms per session, issue 18). Its nested sessions share it too.
	KernelAudit *kernelaudit.Hub
}

// Slots hand Run a slot ready for its session (Slot: Linux only).
type Slots interface {
	// Claim takes the slot that serves a session of opts (netns: its plan
	// asks for a private network namespace), never giving one twice, or
	// says why there is none.
	Claim(opts RunOptions, netns bool) (*Slot, string)
}

// AttachOptions are the inputs of Attach.
type AttachOptions struct {
	PID    int
	Policy *policy.Compiled
	// CallerUID is the user on whose behalf attach runs (SUDO_UID when
	// run through sudo); only their processes may be attached unless
	// AllowOtherUser.
	CallerUID      int
	AllowOtherUser bool
	// NetworkOnly accepts a boundary of network rules and cgroup
	// containment alone when no BPF-LSM can enforce the policy's
	// filesystem rules (attach --network-only); without it such an attach
	// is refused (planner.Options).
	NetworkOnly bool
	Warn        io.Writer
	Unavailable map[string]bool
	Cgroup      cgroup.Config
	Registry    Registry
	// Layers are applied to the session cgroup before any process moves
	// in. With a bpf-lsm layer among them, filesystem rules apply.
	Layers []SessionLayer
	// Plan is the session's layers as package planner decided them, and
	// Layers must hold the BPF layers it names. Without it Attach decides
	// from the kernel's capabilities and the Layers given.
	Plan *planner.Plan
	// Audit is the sink the layers write the session's refusals to; the
	// caller owns it and keeps it open as long as the layers live (they
	// outlive Attach). Nil: each layer opens Policy.Audit.Path itself.
	Audit *audit.FileSink
}

// Status is one session as `sessions` shows it: the registry entry joined
// with the live cgroup.
type Status struct {
	Entry
	// Procs are the pids in the session group now.
	Procs []int `json:"procs"`
	// State is "running", "empty" (group exists, no process),
	// "orphaned" (a run session whose supervisor is gone, e.g. SIGKILLed:
	// what is left stays confined but is killed only by `stop` or a
	// daemon's start), "no-registry" (a group nobody recorded, e.g. after a
	// crash) or "stale" (a record whose group is gone).
	State string `json:"state"`
}
