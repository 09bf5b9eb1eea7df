//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/landlock"
	"github.com/openoxide/oxsupervise/launcher"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
)

// Plan is what Run builds itself of a planner.Plan (the Landlock ruleset,
// the mount namespace, the empty network namespace), bound to this policy
// before anything is created.
type Plan struct {
	Landlock *launcher.Ruleset
	Mounts   launcher.MountPlan
	// NetNS starts the command in a new, empty network namespace: how
	// network "none" is enforced when no cgroup network layer is given.
	NetNS bool
	// LoopbackUp brings up lo inside that namespace, so the session
	// reaches its own listeners and nothing else (loopback "session").
	LoopbackUp bool
	// QuarantineNames watches the writable roots for protected names the
	// session creates (no BPF-LSM refuses them) and moves them out.
	QuarantineNames bool
	// RestrictSockets makes seccomp refuse the socket families and types
	// the network programs cannot judge: network is not "full", and no
	// BPF-LSM socket_create program (which refuses them, audited) runs.
	RestrictSockets bool
	Layers          []string
	// Warnings are binding's own (Landlock's ABI); the planner's are the
	// planner.Plan's.
	Warnings []string
	// mounts are the supervisor's mounts, read once for the session
	// (~0.1 ms a read, issue 18): the mount plan's kernel interfaces and
	// the quarantine watch's filesystems come from the same read.
	mounts []mountinfo.Mount
}

// decide returns opts.Plan, or for a caller that gave none the plan of
// the kernel's capabilities and the BPF layers it handed over.
func decide(verb planner.Verb, plan *planner.Plan, c *policy.Compiled, opts planner.Options, unavailable map[string]bool, layers []SessionLayer) (*planner.Plan, error) {
	if plan != nil {
		if plan.Verb != verb {
			return nil, fmt.Errorf("%s given a plan for %s", verb, plan.Verb)
		}
		return plan, nil
	}
	return planner.Decide(verb, c, externalCapabilities(planner.Probe(unavailable), layers), opts)
}

// bind builds the layers lp gives run's launcher. Deciding which layers a
// session gets is package planner's; what can only be known once the
// rules are built (an ABI that cannot honour the policy) is a refusal when
// Landlock is the filesystem layer and lp's fallback warning when it is
// stacked on BPF-LSM.
func bind(c *policy.Compiled, lp *planner.Plan, mounts []mountinfo.Mount) (*Plan, error) {
	p := &Plan{NetNS: lp.NetNS, LoopbackUp: lp.LoopbackUp, QuarantineNames: lp.QuarantineNames}
	p.Layers = append(p.Layers, LayerCgroup)
	if lp.Landlock != planner.Absent {
		rs, warnings, err := landlock.Plan(c, lp.LandlockABI)
		switch {
		case err != nil && lp.Landlock == planner.Required:
			return nil, &BoundaryError{Layer: LayerLandlock, Err: err}
		case err != nil:
			// BPF-LSM enforces the whole policy; Landlock on top is
			// defence in depth, and an ABI too old to honour all of the
			// policy (truncate before ABI 3) must not block it.
			p.Warnings = append(p.Warnings, fmt.Sprintf(lp.LandlockFallback, err))
		default:
			p.Warnings = append(p.Warnings, warnings...)
			if !rs.Empty() {
				p.Landlock = rs
				p.Layers = append(p.Layers, fmt.Sprintf("%s-abi%d", LayerLandlock, lp.LandlockABI))
			}
		}
	}
	if mounts == nil {
		var err error
		if mounts, err = mountinfo.Read(); err != nil {
			return nil, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("mount namespace: read mountinfo: %w", err)}
		}
	}
	p.mounts = mounts
	m, err := landlock.PlanMounts(c, p.Landlock, mounts)
	if err != nil {
		return nil, &BoundaryError{Layer: LayerMountNS, Err: err}
	}
	if lp.BPFLSM {
		// BPF-LSM refuses every change of a protected entry by inode,
		// with EACCES and an audit record. A read-only bind mount would
		// refuse it first with EROFS, before any LSM is asked, and nothing
		// audits that where BPF-LSM is the filesystem layer (the read-only
		// view's tracer runs only without it). A symlink at a protected
		// name stays in the plan: the mount layer refuses to follow it and
		// names the command that fixes it, as on the Landlock path.
		m.Protected = slices.DeleteFunc(m.Protected, func(a launcher.Inode) bool {
			fi, err := os.Lstat(a.Path)
			return err == nil && fi.Mode()&os.ModeSymlink == 0
		})
		m.Pinned = nil
	}
	// Without BPF-LSM nothing else refuses chmod, chown or utimes outside
	// the writable roots: the mount namespace is read-only there.
	m.ReadOnlyView = lp.ReadOnlyView
	p.Mounts = m
	p.Layers = append(p.Layers, LayerMountNS)
	if p.NetNS {
		p.Layers = append(p.Layers, LayerNetNS)
	}
	// full-access is announced loudly by policy.Load, with where it was set.
	return p, nil
}

// Run runs opts.Argv in a new session and returns its exit status (128+N
// when killed by signal N). A *BoundaryError means nothing ran; an
// *ExecError means the boundary was built but the command could not start.
func Run(ctx context.Context, opts RunOptions) (int, error) {
	warn := opts.Warn
	if warn == nil {
		warn = io.Discard
	}
	if len(opts.Argv) == 0 {
		return 0, errors.New("run: no command given")
	}
	// An agent profile's switches (the agent's own sandbox off) go on the
	// command line when the agent has no environment variable for them.
	opts.Argv = opts.Policy.CommandLine(opts.Argv)
	env := ScrubEnv(opts.Env, opts.Policy.Env)
	caches, err := prepareSandboxCaches(opts.Policy, env, opts.UID, opts.GID)
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise: warning: no sandbox caches (%v): tools use their default caches, which lie outside the writable roots\n", err)
	}
	if caches != nil {
		opts.Policy, env = caches.policy, caches.env
	}
	tm := opts.Timing
	tm.Mark("sandbox caches")
	// The policy's digest (its JSON encoding, hashed: ~0.3-0.7 ms) is
	// first needed in the registry entry; it is computed on the other
	// core while the plan is bound and the launcher starts. opts.Policy
	// is final here, and nothing writes it.
	digest := make(chan string, 1)
	go func(c *policy.Compiled) {
		d, _ := c.Digest()
		digest <- d
	}(opts.Policy)
	lp, err := decide(planner.Run, opts.Plan, opts.Policy, planner.Options{}, opts.Unavailable, opts.Layers)
	if err != nil {
		return 0, err
	}
	// The plan's warnings first: they say why a layer is missing even
	// when binding the one left then refuses.
	for _, w := range lp.Warnings {
		fmt.Fprintf(warn, "oxsupervise: warning: %s\n", w)
	}
	plan, err := bind(opts.Policy, lp, opts.Mounts)
	if err != nil {
		return 0, err
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(warn, "oxsupervise: warning: %s\n", w)
	}
	tm.Mark("bind (Landlock ruleset, mount plan)")
	tierNote := sharedTierNote(opts.Policy, env)
	if tierNote != "" {
		fmt.Fprintf(warn, "oxsupervise: warning: %s\n", tierNote)
	}
	exe, err := LookPath(opts.Argv[0], env)
	if err != nil {
		return 127, &ExecError{127, err}
	}
	// The session's own /dev/shm is made here, not by the launcher: its
	// filesystem must be known to the layers before the command runs.
	var shm *os.File
	if plan.Mounts.PrivateShm {
		if shm, err = launcher.NewPrivateShm(plan.Mounts.ShmReadOnly); err != nil {
			return 0, &BoundaryError{Layer: LayerMountNS, Err: err}
		}
		defer shm.Close()
	}

	id, group, l, err := startSession(opts, plan.NetNS, cgroup.Limits{
		PidsMax: opts.Policy.Limits.PidsMax, MemoryMax: opts.Policy.Limits.MemoryMax,
	})
	if err != nil {
		return 0, err
	}
	for _, w := range group.Warnings {
		fmt.Fprintf(warn, "oxsupervise: warning: limit %s\n", w)
	}
	started := time.Now().UTC()
	early, gated := splitExecGated(opts.Layers)
	released := attachAhead(gated)
	// The launcher gets its spec now and builds its mount namespace while
	// the rest of the session is set up below; it execs the command only
	// once run opens its exec gate, when every layer (early and gated)
	// is applied and the registry entry is in place, and until then
	// killing it (abort) leaves nothing of the command. What follows
	// need not precede the launcher's set-up:
	//   - the registry entry: the launcher looks nothing up in it, and
	//     what does (`ps`, `stop`, a nested session's supervisor) is
	//     about the command, which runs only after the gate;
	//   - the audit sink and the launcher's pid (its attribution): the
	//     launcher's set-up is refused nothing that is audited (no
	//     Landlock or seccomp domain restricts it before it narrows
	//     itself, and then it only installs seccomp and waits at the
	//     gate), so no record of the session exists before the exec;
	//   - the early layers, the network programs: their rules apply to
	//     the session once added (a cgroup in no session is judged by
	//     none), and the launcher's one socket (loopbackUp's, a UDP one
	//     for an ioctl) is refused by no mode and closed before the exec,
	//     so whether it predates the rules changes neither enforcement
	//     nor the audit. Layers whose rules would refuse the launcher's
	//     own mounts (BPF-LSM, the read-only view's audit) are the
	//     exec-gated ones, applied at the gate as before;
	//   - the kernel audit follow, the agent guard's snapshot and the
	//     name watch: they must see the command, which runs after the
	//     gate; the launcher's mounts create no names on any filesystem
	//     (bind mounts onto existing entries, new tmpfs), and the name
	//     watch marks whole filesystems, the launcher's view included;
	//   - the signals the session forwards were registered before the
	//     launcher started (startLauncher, NewSlot), and are forwarded
	//     once the command runs.
	spec := LaunchSpec{
		SessionID: id, Path: exe, Argv: opts.Argv, Env: append(append(env, opts.SessionEnv...), SessionEnv+"="+id), Dir: opts.Dir,
		UID: opts.UID, GID: opts.GID, Groups: opts.Groups, Capabilities: opts.Policy.CapabilityNames(),
		Mounts: plan.Mounts, Landlock: plan.Landlock, LoopbackUp: plan.LoopbackUp,
		RestrictSockets: lp.SeccompSockets,
		ExecGate:        true,
	}
	if err := l.send(opts, spec, shm); err != nil {
		l.abort()
		cleanupSession(group, opts.Registry, id, warn)
		released()
		return 0, err
	}
	tm.Mark("launch spec sent")
	entry := Entry{
		ID: id, Kind: KindRun, SupervisorPID: os.Getpid(), UID: opts.UID,
		Mode: string(opts.Policy.Mode), Cgroup: group.Path, CgroupID: group.CgroupID,
		Command: opts.Argv, Layers: plan.Layers, PolicyDigest: <-digest, Started: started,
		// The launcher's pid is the command's: it execs in place.
		PID: l.pid(), Launcher: l.program,
	}
	for _, l := range opts.Layers {
		entry.Layers = append(entry.Layers, l.Name())
	}
	if err := opts.Registry.Put(entry); err != nil {
		l.abort()
		cleanupSession(group, opts.Registry, id, warn)
		released()
		return 0, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	// The session's one audit sink: the supervisor's records and every
	// layer's refusals go through it.
	aud := openAuditor(opts.Policy.Audit, id, string(opts.Policy.Mode), warn)
	aud.startNote = tierNote
	aud.setLauncherPID(l.pid())
	// The BPF-LSM path's check of the .git files the session creates.
	created := startCreatedCheck(lp, plan, opts, id, caches, aud, warn)
	info := SessionInfo{ID: id, CgroupPath: group.Path, CgroupID: group.CgroupID, Policy: opts.Policy, Audit: aud.sink,
		Created: created.created()}
	if shm != nil && !plan.Mounts.ShmReadOnly {
		info.PrivateShm = shm
	}
	undoLayers, err := applyLayers(ctx, early, info)
	if err != nil {
		l.abort()
		cleanupSession(group, opts.Registry, id, warn)
		released()
		created.close()
		aud.close()
		return 0, err
	}
	tm.Mark("registry, audit sink, early layers")
	if opts.OnStart != nil {
		opts.OnStart(info)
	}
	// Gated layers are applied at the launcher's exec gate, after its
	// mounts and before anything of the command runs.
	undoGated := func(context.Context) {}
	activate := func() error {
		undo, err := applyLayers(ctx, gated, info)
		if err != nil {
			return err
		}
		undoGated = undo
		return nil
	}
	if lp.KernelAudit {
		aud.followKernelAudit(opts.Cgroup, opts.KernelAudit)
	}
	guard := startAgentGuard(opts.Policy, env, opts.UID)
	tm.Mark("kernel audit follow, agent guard")
	names := startNameWatch(plan, opts, id, caches, aud, warn)
	tm.Mark("name watch")
	code, err := l.run(ctx, opts, &entry, aud, activate)
	// Whatever happened, nothing of the session outlives this call.
	end := runEnd{
		id: id, group: group, reg: opts.Registry, aud: aud, entry: &entry, mode: string(opts.Policy.Mode),
		names: names, create: created, guard: guard, undoEarly: undoLayers, undoGated: undoGated,
		released: released, launcher: l, exitAfter: opts.ExitAfter, beforeExit: opts.BeforeExit, tm: tm, warn: warn,
	}
	end.settle(code, err)
	if opts.Settled != nil {
		opts.Settled(code, err)
	}
	end.release()
	return code, err
}

// execGated is implemented by SessionLayers whose rules would refuse the
// launcher's own setup: BPF-LSM refuses mounts to session tasks, and the
// launcher, born in the session cgroup, still has its mount namespace to
// build. Run applies them at the exec gate, once it is built.
type execGated interface {
	activatesBeforeExec()
}

// attachesAhead is implemented by exec-gated layers that can do the
// costly part of their Apply while the launcher starts (ROViewLayer: the
// program's attach). The returned function undoes it unless a session
// was applied.
type attachesAhead interface {
	attachAhead() (release func())
}

// attachAhead calls attachAhead of each of layers that has it, on
// another goroutine: attaching (~0.3 ms) overlaps the registry entry, the
// audit sink and the early layers, which the exec gate waits for. A layer
// applied at the gate before its attachAhead ran attaches there itself
// (its own lock orders the two). The returned function waits for them and
// releases them all.
func attachAhead(layers []SessionLayer) (release func()) {
	var ahead []attachesAhead
	for _, l := range layers {
		if a, ok := l.(attachesAhead); ok {
			ahead = append(ahead, a)
		}
	}
	if len(ahead) == 0 {
		return func() {}
	}
	attached := make(chan []func(), 1)
	go func() {
		releases := make([]func(), 0, len(ahead))
		for _, a := range ahead {
			releases = append(releases, a.attachAhead())
		}
		attached <- releases
	}()
	return sync.OnceFunc(func() {
		for _, r := range <-attached {
			r()
		}
	})
}

// splitExecGated separates the layers run applies while the launcher
// builds its mount namespace from those it applies at the exec gate,
// keeping their order.
func splitExecGated(layers []SessionLayer) (early, gated []SessionLayer) {
	for _, l := range layers {
		if _, ok := l.(execGated); ok {
			gated = append(gated, l)
		} else {
			early = append(early, l)
		}
	}
	return early, gated
}

func warnOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// sameForegroundGroup reports whether the supervisor is in the terminal's
// foreground process group, i.e. the command got a terminal signal too.
func sameForegroundGroup() bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}
