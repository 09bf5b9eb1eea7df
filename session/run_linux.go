//go:build linux

package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/landlock"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
)

// Plan is what Run builds itself of a planner.Plan (the Landlock ruleset,
// the mount namespace, the empty network namespace), bound to this policy
// before anything is created.
type Plan struct {
	Landlock *landlock.Ruleset
	Mounts   landlock.MountPlan
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
}

// decide returns opts.Plan, or for a caller that gave none the plan of
// the kernel's capabilities and the BPF layers it handed over.
func decide(verb planner.Verb, plan *planner.Plan, c *policy.Compiled, unavailable map[string]bool, layers []SessionLayer) (*planner.Plan, error) {
	if plan != nil {
		if plan.Verb != verb {
			return nil, fmt.Errorf("%s given a plan for %s", verb, plan.Verb)
		}
		return plan, nil
	}
	return planner.Decide(verb, c, externalCapabilities(planner.Probe(unavailable), layers))
}

// bind builds the layers lp gives run's launcher. Deciding which layers a
// session gets is package planner's; what can only be known once the
// rules are built (an ABI that cannot honour the policy) is a refusal when
// Landlock is the filesystem layer and lp's fallback warning when it is
// stacked on BPF-LSM.
func bind(c *policy.Compiled, lp *planner.Plan) (*Plan, error) {
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
	m, err := landlock.PlanMounts(c, p.Landlock)
	if err != nil {
		return nil, &BoundaryError{Layer: LayerMountNS, Err: err}
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
		defer caches.close()
	}
	lp, err := decide(planner.Run, opts.Plan, opts.Policy, opts.Unavailable, opts.Layers)
	if err != nil {
		return 0, err
	}
	// The plan's warnings first: they say why a layer is missing even
	// when binding the one left then refuses.
	for _, w := range lp.Warnings {
		fmt.Fprintf(warn, "oxsupervise: warning: %s\n", w)
	}
	plan, err := bind(opts.Policy, lp)
	if err != nil {
		return 0, err
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(warn, "oxsupervise: warning: %s\n", w)
	}
	tierNote := sharedTierNote(opts.Policy, env)
	if tierNote != "" {
		fmt.Fprintf(warn, "oxsupervise: warning: %s\n", tierNote)
	}
	exe, err := LookPath(opts.Argv[0], env)
	if err != nil {
		return 127, &ExecError{127, err}
	}

	id, err := NewID()
	if err != nil {
		return 0, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	group, err := cgroup.NewSession(opts.Cgroup, id, cgroup.Limits{
		PidsMax: opts.Policy.Limits.PidsMax, MemoryMax: opts.Policy.Limits.MemoryMax,
	})
	if err != nil {
		return 0, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	for _, w := range group.Warnings {
		fmt.Fprintf(warn, "oxsupervise: warning: limit %s\n", w)
	}
	digest, _ := opts.Policy.Digest()
	entry := Entry{
		ID: id, Kind: KindRun, SupervisorPID: os.Getpid(), UID: opts.UID,
		Mode: string(opts.Policy.Mode), Cgroup: group.Path, CgroupID: group.CgroupID,
		Command: opts.Argv, Layers: plan.Layers, PolicyDigest: digest, Started: time.Now().UTC(),
	}
	for _, l := range opts.Layers {
		entry.Layers = append(entry.Layers, l.Name())
	}
	if err := opts.Registry.Put(entry); err != nil {
		cleanupSession(group, opts.Registry, id, warn)
		return 0, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	// The session's one audit sink: the supervisor's records and every
	// layer's refusals go through it.
	aud := openAuditor(opts.Policy.Audit, id, string(opts.Policy.Mode), warn)
	aud.startNote = tierNote
	// The BPF-LSM path's check of the .git files the session creates.
	created := startCreatedCheck(lp, opts, id, caches, aud, warn)
	info := SessionInfo{ID: id, CgroupPath: group.Path, CgroupID: group.CgroupID, Policy: opts.Policy, Audit: aud.sink,
		Created: created.created()}
	early, gated := splitExecGated(opts.Layers)
	undoLayers, err := applyLayers(ctx, early, info)
	if err != nil {
		cleanupSession(group, opts.Registry, id, warn)
		created.close()
		aud.close()
		return 0, err
	}
	if opts.OnStart != nil {
		opts.OnStart(info)
	}
	// Gated layers are applied at the launcher's exec gate, after its
	// mounts and before anything of the command runs.
	undoGated := func(context.Context) {}
	activate := func(launcherPID int) error {
		info := info
		if plan.Mounts.PrivateShm && !plan.Mounts.ShmReadOnly {
			a, err := sessionShm(launcherPID)
			if err != nil {
				return &BoundaryError{Layer: LayerMountNS, Err: err}
			}
			info.Writable = append(info.Writable, a)
		}
		undo, err := applyLayers(ctx, gated, info)
		if err != nil {
			return err
		}
		undoGated = undo
		return nil
	}
	if plan.Landlock != nil {
		aud.followLandlock(opts.Cgroup)
	}
	guard := startAgentGuard(opts.Policy, env, opts.UID)

	spec := LaunchSpec{
		SessionID: id, Path: exe, Argv: opts.Argv, Env: append(append(env, opts.SessionEnv...), SessionEnv+"="+id), Dir: opts.Dir,
		UID: opts.UID, GID: opts.GID, Groups: opts.Groups, Capabilities: opts.Policy.CapabilityNames(),
		Mounts: plan.Mounts, Landlock: plan.Landlock, LoopbackUp: plan.LoopbackUp,
		RestrictSockets: lp.SeccompSockets,
		ExecGate:        len(gated) > 0,
	}
	names := startNameWatch(plan, opts, id, caches, aud, warn)
	code, err := launch(ctx, opts, group, spec, plan.NetNS, &entry, aud, activate)
	// Whatever happened, nothing of the session outlives this call.
	cleanupSession(group, opts.Registry, id, warn)
	// Every process of the session is gone: the final check of names.
	names.close()
	tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	undoGated(tctx)
	undoLayers(tctx)
	cancel()
	// The layers have handed over every report: the check of the entries
	// they let the session create.
	created.close()
	guard.finish(aud, id, string(opts.Policy.Mode), warn)
	aud.sessionStop(&entry, code, err)
	aud.close()
	return code, err
}

// sessionShm is the anchor of the private /dev/shm the launcher (pid)
// mounted in its namespace, where only the session sees it.
func sessionShm(pid int) (policy.Anchor, error) {
	p := fmt.Sprintf("/proc/%d/root/dev/shm", pid)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return policy.Anchor{}, fmt.Errorf("the session's private /dev/shm: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return policy.Anchor{}, fmt.Errorf("the session's private /dev/shm (%s) is not a directory", p)
	}
	return policy.Anchor{Path: p, Exists: true, Dir: true, Dev: st.Dev, Ino: st.Ino, Source: "the session's private /dev/shm"}, nil
}

// cleanupSession kills every process left in the group (setsid and double
// forks included), removes the group and the registry entry.
func cleanupSession(group *cgroup.Group, reg Registry, id string, warn io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := os.Stat(group.Path); errors.Is(err, fs.ErrNotExist) {
		// `oxsupervise stop` got there first.
		reg.Delete(id)
		return
	}
	if err := group.Kill(ctx); err != nil {
		fmt.Fprintf(warn, "oxsupervise: session %s: %v\n", id, err)
	}
	if err := group.Remove(ctx); err != nil {
		fmt.Fprintf(warn, "oxsupervise: session %s: %v\n", id, err)
	}
	if err := reg.Delete(id); err != nil {
		fmt.Fprintf(warn, "oxsupervise: session %s: %v\n", id, err)
	}
}

// execGated is implemented by SessionLayers whose rules would refuse the
// launcher's own setup: BPF-LSM refuses mounts to session tasks, and the
// launcher, born in the session cgroup, still has its mount namespace to
// build. Run applies them at the exec gate instead of before the launch.
type execGated interface {
	activatesBeforeExec()
}

// splitExecGated separates the layers run applies before the launcher
// starts from those it applies at the exec gate, keeping their order.
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

// Exec gate messages on the launcher's gate socket.
const (
	gateMountsDone = 'm' // launcher: mount namespace built, nothing else done
	gateGo         = 'g' // supervisor: gated layers active, go on to exec
)

// launch starts the launcher in group and waits for the command. When
// spec.ExecGate is set, the launcher stops after building its mount
// namespace; activate applies the gated layers then, and the launcher
// goes on (drops privileges, applies Landlock, execs) only once it
// succeeded, so nothing of the command runs without them.
func launch(ctx context.Context, opts RunOptions, group *cgroup.Group, spec LaunchSpec, netns bool, entry *Entry, aud *auditor, activate func(launcherPID int) error) (int, error) {
	cgFD, err := group.OpenFD()
	if err != nil {
		return 0, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	defer cgFD.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return 0, &BoundaryError{Layer: LayerMountNS, Err: err}
	}
	defer specR.Close()
	defer specW.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return 0, &BoundaryError{Layer: LayerMountNS, Err: err}
	}
	defer statusR.Close()
	defer statusW.Close()

	extra := []*os.File{specR, statusW}
	var gateParent *os.File
	if spec.ExecGate {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return 0, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("exec gate socket: %w", err)}
		}
		gateParent = os.NewFile(uintptr(fds[0]), "exec-gate")
		gateChild := os.NewFile(uintptr(fds[1]), "exec-gate-launcher")
		defer gateParent.Close()
		defer gateChild.Close()
		extra = append(extra, gateChild) // gateFD
	}

	self := opts.SelfExe
	if self == "" {
		self = "/proc/self/exe"
	}
	cloneflags := uintptr(syscall.CLONE_NEWNS)
	if netns {
		cloneflags |= syscall.CLONE_NEWNET
	}
	// Pdeathsig is tied to the thread that forks: keep this goroutine on
	// one thread for the life of the session.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := &exec.Cmd{
		Path:       self,
		Args:       []string{"oxsupervise", LauncherVerb},
		Env:        []string{},
		Stdin:      opts.Stdin,
		Stdout:     opts.Stdout,
		Stderr:     opts.Stderr,
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			UseCgroupFD: true,
			CgroupFD:    int(cgFD.Fd()),
			Cloneflags:  cloneflags,
			Pdeathsig:   syscall.SIGKILL,
		},
	}
	if cmd.Stdin == nil {
		cmd.Stdin = os.Stdin
	}
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	// Register before the child exists so no signal falls between.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	defer signal.Stop(sigs)

	if err := cmd.Start(); err != nil {
		return 0, &BoundaryError{Layer: LayerCgroup, Err: fmt.Errorf("start launcher in %s: %w", group.Path, err)}
	}
	aud.setLauncherPID(cmd.Process.Pid)
	specR.Close()
	statusW.Close()
	if gateParent != nil {
		extra[gateFD-3].Close()
	}
	b, _ := json.Marshal(spec)
	_, werr := specW.Write(b)
	specW.Close()
	if gateParent != nil && werr == nil {
		var msg [1]byte
		// EOF: the launcher failed before its mounts were done; its
		// status says why.
		if n, _ := gateParent.Read(msg[:]); n == 1 && msg[0] == gateMountsDone {
			if err := activate(cmd.Process.Pid); err != nil {
				// The launcher has not exec'd: nothing of the command ran.
				cmd.Process.Kill()
				cmd.Wait()
				return 0, err
			}
			if _, err := gateParent.Write([]byte{gateGo}); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				return 0, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("open the exec gate: %w", err)}
			}
		}
		gateParent.Close()
	}

	status, _ := io.ReadAll(statusR)
	if werr != nil || len(status) > 0 {
		cmd.Wait()
		var f launchFailure
		if werr != nil {
			return 0, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("send launch spec: %w", werr)}
		}
		if err := json.Unmarshal(status, &f); err != nil {
			return 0, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("launcher: %s", status)}
		}
		if f.Exec != 0 {
			return f.Exec, &ExecError{f.Exec, errors.New(f.Error)}
		}
		return 0, &BoundaryError{Layer: f.Layer, Err: errors.New(f.Error)}
	}
	entry.PID = cmd.Process.Pid
	if err := opts.Registry.Put(*entry); err != nil {
		fmt.Fprintf(warnOrDiscard(opts.Warn), "oxsupervise: session %s: %v\n", entry.ID, err)
	}
	aud.sessionStart(entry)

	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				if (s == unix.SIGINT || s == unix.SIGQUIT || s == unix.SIGWINCH) && sameForegroundGroup() {
					// The terminal already delivered it to the command.
					continue
				}
				cmd.Process.Signal(s)
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	if code, ok := ExitStatus(err); ok {
		return code, nil
	}
	return 0, fmt.Errorf("wait for session %s: %w", entry.ID, err)
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
