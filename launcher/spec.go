package launcher

// Verb is the hidden first argument that turns the oxsupervise binary
// itself into the launcher, for a supervisor with no launcher program
// installed beside it (and for test binaries that are their own launcher).
// The supervisor passes it; users never do.
const Verb = "__launch"

// The launcher's inherited descriptors, as the supervisor passes them
// (os/exec's ExtraFiles[i] is 3+i).
const (
	// SpecFD is the spec channel, a Unix socket to the supervisor: the
	// Spec and the session's descriptors come on it (channel_linux.go),
	// and with Spec.ExecGate it is the exec gate afterwards: the launcher
	// sends GateMountsDone once its mount namespace is built, narrows
	// itself (Landlock, credentials, seccomp) meanwhile, and waits for
	// GateGo before it execs.
	SpecFD   = 3
	StatusFD = 4 // close-on-exec: EOF means the command was executed
)

// Exec gate messages on SpecFD.
const (
	GateMountsDone = 'm' // launcher: mount namespace built, no mount follows
	GateGo         = 'g' // supervisor: gated layers active, exec
)

// SpecVersion is the version of Spec this launcher understands. The
// launcher program and the supervisor are separate files: one from another
// build must refuse the spec (nothing runs) rather than read a boundary it
// does not know. Bump it whenever a field changes meaning; a field it does
// not know at all is refused anyway (the spec is decoded strictly). 3: the
// spec travels in the wire encoding (wire.go), no longer as JSON; a JSON
// spec fails to decode in this launcher, as this encoding does in one
// that reads JSON; and a nested session's launcher waits
// at its exec gate (ExecGate) until its supervisor admitted it.
const SpecVersion = 3

// Spec is everything the launcher needs; the supervisor computes it so
// that the launcher makes no policy decisions of its own.
type Spec struct {
	// Version is SpecVersion of the supervisor that wrote it.
	Version   int      `json:"version"`
	SessionID string   `json:"session_id"`
	Path      string   `json:"path"`
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir"`
	UID       int      `json:"uid"`
	GID       int      `json:"gid"`
	Groups    []int    `json:"groups"`
	// Capabilities are the only ones the command keeps (policy
	// sandbox.capabilities, by name); every other one is dropped from
	// all five sets, root included.
	Capabilities []string `json:"capabilities,omitempty"`

	Mounts   MountPlan `json:"mounts"`
	Landlock *Ruleset  `json:"landlock,omitempty"`
	// RestrictSockets makes the seccomp filter refuse socket families
	// and types the network layers cannot judge (network is not "full").
	RestrictSockets bool `json:"restrict_sockets,omitempty"`
	// LoopbackUp brings up lo in the launcher's private network namespace
	// (only meaningful when the supervisor cloned one).
	LoopbackUp bool `json:"loopback_up,omitempty"`
	// ExecGate makes the launcher report on the exec gate (SpecFD) once
	// its mount namespace is built, and exec only once the supervisor
	// answers: the supervisor activates the layers that would refuse
	// those mounts (BPF-LSM) in between. A Nested launcher builds no
	// mounts and reports nothing: it narrows itself completely and
	// waits for GateGo, which its nested run sends once the supervisor
	// has moved it into the child's group (version 3; a version-2
	// launcher exec'd a nested spec at once).
	ExecGate bool `json:"exec_gate,omitempty"`
	// Nested is a nested session's launcher: started by the nested `run`
	// inside its parent session, which has no privilege left to use. It
	// keeps the caller's credentials, audit session and mount namespace
	// (the parent's, already built and dropped) and only narrows them:
	// the stacked Landlock domain, no_new_privs and the seccomp filter.
	Nested bool `json:"nested,omitempty"`
}

// Step is the part of the launcher's work that failed. Which layer of the
// session it belongs to is the supervisor's to say (package session).
type Step string

// The launcher's steps, in the order it takes them.
const (
	StepSpec        Step = "spec"        // reading and decoding the Spec
	StepMounts      Step = "mounts"      // MountPlan.Apply
	StepLoopback    Step = "loopback"    // Spec.LoopbackUp
	StepExecGate    Step = "exec-gate"   // Spec.ExecGate
	StepLandlock    Step = "landlock"    // Ruleset.Prepare, Prepared.RestrictSelf
	StepDescriptors Step = "descriptors" // inherited descriptors closed at exec
	StepCredentials Step = "credentials" // user, capabilities, parent-death signal, chdir
	StepSeccomp     Step = "seccomp"     // the session's seccomp filter
)

// Failure is what the launcher reports on StatusFD when it fails: Step
// when building the boundary failed (exit 125, the command did not run),
// Exec when the exec of the command did (126, or 127 when it is missing).
type Failure struct {
	Step  Step   `json:"step,omitempty"`
	Exec  int    `json:"exec,omitempty"`
	Error string `json:"error"`
}
