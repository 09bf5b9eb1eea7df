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
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/landlock"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
)

// RunOptions are the inputs of Run.
type RunOptions struct {
	Policy *policy.Compiled
	// Argv is the command; Argv[0] is looked up in the scrubbed PATH.
	Argv []string
	// Env is the caller's environment; Run scrubs it per Policy.Env.
	Env []string
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
	// SelfExe is the launcher binary; "" means /proc/self/exe.
	SelfExe  string
	Cgroup   cgroup.Config
	Registry Registry
	// Layers are applied to the session cgroup before the launcher starts
	// (cgroup network programs), except those whose rules would refuse
	// the launcher's mounts (BPF-LSM, FSLayer): those at the exec gate,
	// after the launcher's mount namespace is built and before it execs.
	Layers []SessionLayer
	// OnStart, when set, is called once with the session's identity after
	// its cgroup exists and the layers applied before the launch are in
	// place, and before the command's first instruction: how a
	// supervisor (the daemon) learns the id of the session it waits for.
	OnStart func(SessionInfo)
}

// Plan is the set of layers a session gets, decided before anything is
// created.
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
	Warnings        []string
}

// Decide probes the machine and decides the layers for c. A layer the
// policy needs that cannot be built is a *BoundaryError.
//
// BPF-LSM (DESIGN §3) is the primary filesystem layer when external holds
// a SessionLayer named LayerBPFLSM; Landlock and the mount namespace are
// stacked on top as defence in depth, and are the filesystem layer on
// their own when BPF-LSM is not usable.
func Decide(c *policy.Compiled, unavailable map[string]bool, external []SessionLayer) (*Plan, error) {
	p := &Plan{}
	if unavailable[LayerCgroup] {
		return nil, &BoundaryError{LayerCgroup, errors.New("marked unavailable by " + ForceUnavailableEnv)}
	}
	if _, err := cgroup.Cgroup2Mount(); err != nil {
		return nil, &BoundaryError{LayerCgroup, err}
	}
	p.Layers = append(p.Layers, LayerCgroup)

	if unavailable[LayerMountNS] {
		return nil, &BoundaryError{LayerMountNS, errors.New("marked unavailable by " + ForceUnavailableEnv)}
	}

	abi, llErr := landlock.ABI()
	if unavailable[LayerLandlock] {
		llErr = errors.New("marked unavailable by " + ForceUnavailableEnv)
	}
	if llErr != nil {
		if c.FilesystemRules && !hasLayer(external, LayerBPFLSM) {
			lsmErr := errors.New("marked unavailable by " + ForceUnavailableEnv)
			if !unavailable[LayerBPFLSM] {
				lsmErr = loader.ProbeBPFLSM()
				if lsmErr == nil {
					lsmErr = errors.New("usable, but this supervisor did not load it")
				}
			}
			return nil, &BoundaryError{LayerLandlock, fmt.Errorf("%v; no other filesystem layer either (bpf-lsm: %v)", llErr, lsmErr)}
		}
		if c.Mode != policy.ModeFullAccess {
			p.Warnings = append(p.Warnings, fmt.Sprintf("landlock unavailable (%v): no signal or abstract-socket scoping", llErr))
		}
	} else if hasLayer(external, LayerBPFLSM) && abi < landlock.AuditABI {
		// Landlock comes before bpf in every kernel's LSM order, so a
		// refusal both layers would make is Landlock's; below ABI 7 the
		// kernel does not audit it, and nothing would report it. BPF-LSM
		// enforces (and reports) the whole policy alone.
		p.Warnings = append(p.Warnings, fmt.Sprintf("landlock not stacked on BPF-LSM: ABI %d cannot report refusals to audit (needs ABI %d)", abi, landlock.AuditABI))
	} else {
		rs, warnings, err := landlock.Plan(c, abi)
		switch {
		case err != nil && !hasLayer(external, LayerBPFLSM):
			return nil, &BoundaryError{LayerLandlock, err}
		case err != nil:
			// BPF-LSM enforces the whole policy; Landlock on top is
			// defence in depth, and an ABI too old to honour all of the
			// policy (truncate before ABI 3) must not block it.
			p.Warnings = append(p.Warnings, fmt.Sprintf("landlock not stacked on BPF-LSM: %v", err))
		default:
			p.Warnings = append(p.Warnings, warnings...)
			if !rs.Empty() {
				p.Landlock = rs
				p.Layers = append(p.Layers, fmt.Sprintf("%s-abi%d", LayerLandlock, abi))
			}
		}
	}

	m, err := landlock.PlanMounts(c, p.Landlock)
	if err != nil {
		return nil, &BoundaryError{LayerMountNS, err}
	}
	// Without BPF-LSM nothing else refuses chmod, chown or utimes outside
	// the writable roots: the mount namespace is read-only there.
	m.ReadOnlyView = c.FilesystemRules && !hasLayer(external, LayerBPFLSM)
	p.RestrictSockets = c.Network.Policy != policy.NetFull && !hasLayer(external, LayerBPFLSM)
	p.Mounts = m
	p.Layers = append(p.Layers, LayerMountNS)

	if r, ok := c.Requires(policy.RequireBPFLSM); ok && c.FilesystemRules && !hasLayer(external, LayerBPFLSM) {
		return nil, &BoundaryError{LayerBPFLSM, requireBPFLSMError(r, unavailable)}
	}
	if c.FilesystemRules && len(c.ProtectedPatterns) > 0 && len(c.WritableRoots) > 0 && !hasLayer(external, LayerBPFLSM) {
		// Landlock and bind mounts only protect inodes that exist now, and
		// oxsupervise never creates placeholders on the host: a protected
		// name created during the session (git init, a first .claude/) is
		// moved out when it appears (package quarantine), not refused.
		p.QuarantineNames = true
		p.Warnings = append(p.Warnings, "without BPF-LSM, protected names created during the session (a new .git/hooks, a first .claude/) are not refused: each is moved to quarantine when the session makes it, and none is left when it ends")
	}
	if c.Mode != policy.ModeFullAccess {
		// Landlock (ABI <= 7) has no right for connect(2) on a pathname
		// socket, a network namespace does not cover AF_UNIX, and the
		// BPF-LSM filesystem programs (fsguard) hook no socket connect
		// either: say so whichever filesystem layer runs.
		p.Warnings = append(p.Warnings, "connections to pathname unix sockets outside writable roots are NOT blocked; only the well-known ones (systemd, D-Bus, docker, podman, ssh/gpg agents) are hidden and abstract sockets scoped")
	}
	if err := decideNetwork(p, c, unavailable, external); err != nil {
		return nil, err
	}
	// full-access is announced loudly by policy.Load, with where it was set.
	return p, nil
}

// decideNetwork picks how c.Network is enforced. A SessionLayer named
// LayerNetwork (cgroup BPF) owns it when present; otherwise only "none" can
// be honoured, with an empty network namespace, and an allowlist cannot be
// honoured at all: running it with full network would be a silently weaker
// boundary, so it is refused.
func decideNetwork(p *Plan, c *policy.Compiled, unavailable map[string]bool, external []SessionLayer) error {
	if hasLayer(external, LayerNetwork) || c.Network.Policy == policy.NetFull {
		return nil
	}
	// The zero value is treated as the default, none: a hand-built
	// Compiled must not get full network by omission.
	if c.Network.Policy != policy.NetNone && c.Network.Policy != "" {
		return &BoundaryError{LayerNetwork, fmt.Errorf("network policy %q needs the cgroup network layer, which this supervisor does not provide; use --net none or --net full", c.Network.Policy)}
	}
	if unavailable[LayerNetNS] {
		return &BoundaryError{LayerNetNS, errors.New("marked unavailable by " + ForceUnavailableEnv)}
	}
	p.NetNS = true
	p.LoopbackUp = c.Network.Loopback != policy.LoopbackNone
	p.Layers = append(p.Layers, LayerNetNS)
	if c.Network.Loopback == policy.LoopbackAll {
		p.Warnings = append(p.Warnings, "network none without the cgroup network layer: the session has its own loopback; the host's loopback services (loopback = \"all\") are NOT reachable")
	}
	return nil
}

func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	pathEnv := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found in PATH", file)
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
	env := ScrubEnv(opts.Env, opts.Policy.Env)
	caches, err := prepareSandboxCaches(opts.Policy, env, opts.UID, opts.GID)
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise: warning: no sandbox caches (%v): tools use their default caches, which lie outside the writable roots\n", err)
	}
	if caches != nil {
		opts.Policy, env = caches.policy, caches.env
		defer caches.close()
	}
	plan, err := Decide(opts.Policy, opts.Unavailable, opts.Layers)
	if err != nil {
		return 0, err
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(warn, "oxsupervise: warning: %s\n", w)
	}
	exe, err := lookPath(opts.Argv[0], env)
	if err != nil {
		return 127, &ExecError{127, err}
	}

	id, err := NewID()
	if err != nil {
		return 0, &BoundaryError{LayerCgroup, err}
	}
	group, err := cgroup.NewSession(opts.Cgroup, id, cgroup.Limits{
		PidsMax: opts.Policy.Limits.PidsMax, MemoryMax: opts.Policy.Limits.MemoryMax,
	})
	if err != nil {
		return 0, &BoundaryError{LayerCgroup, err}
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
		return 0, &BoundaryError{LayerCgroup, err}
	}
	info := SessionInfo{ID: id, CgroupPath: group.Path, CgroupID: group.CgroupID, Policy: opts.Policy}
	early, gated := splitExecGated(opts.Layers)
	undoLayers, err := applyLayers(ctx, early, info)
	if err != nil {
		cleanupSession(group, opts.Registry, id, warn)
		return 0, err
	}
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
	aud := startAudit(opts.Policy.Audit, id, string(opts.Policy.Mode), opts.Cgroup, plan.Landlock != nil, warn)

	spec := LaunchSpec{
		SessionID: id, Path: exe, Argv: opts.Argv, Env: append(env, SessionEnv+"="+id), Dir: opts.Dir,
		UID: opts.UID, GID: opts.GID, Groups: opts.Groups, Capabilities: opts.Policy.CapabilityNames(),
		Mounts: plan.Mounts, Landlock: plan.Landlock, LoopbackUp: plan.LoopbackUp,
		RestrictSockets: plan.RestrictSockets,
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
	aud.sessionStop(&entry, code, err)
	aud.close()
	return code, err
}

// SessionEnv tells the command (and tools it runs) which session it is in.
const SessionEnv = "OXSUPERVISE_SESSION"

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
func launch(ctx context.Context, opts RunOptions, group *cgroup.Group, spec LaunchSpec, netns bool, entry *Entry, aud *auditor, activate func() error) (int, error) {
	cgFD, err := group.OpenFD()
	if err != nil {
		return 0, &BoundaryError{LayerCgroup, err}
	}
	defer cgFD.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return 0, &BoundaryError{LayerMountNS, err}
	}
	defer specR.Close()
	defer specW.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return 0, &BoundaryError{LayerMountNS, err}
	}
	defer statusR.Close()
	defer statusW.Close()

	extra := []*os.File{specR, statusW}
	var gateParent *os.File
	if spec.ExecGate {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return 0, &BoundaryError{LayerMountNS, fmt.Errorf("exec gate socket: %w", err)}
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
		return 0, &BoundaryError{LayerCgroup, fmt.Errorf("start launcher in %s: %w", group.Path, err)}
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
			if err := activate(); err != nil {
				// The launcher has not exec'd: nothing of the command ran.
				cmd.Process.Kill()
				cmd.Wait()
				return 0, err
			}
			if _, err := gateParent.Write([]byte{gateGo}); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				return 0, &BoundaryError{LayerMountNS, fmt.Errorf("open the exec gate: %w", err)}
			}
		}
		gateParent.Close()
	}

	status, _ := io.ReadAll(statusR)
	if werr != nil || len(status) > 0 {
		cmd.Wait()
		var f launchFailure
		if werr != nil {
			return 0, &BoundaryError{LayerMountNS, fmt.Errorf("send launch spec: %w", werr)}
		}
		if err := json.Unmarshal(status, &f); err != nil {
			return 0, &BoundaryError{LayerMountNS, fmt.Errorf("launcher: %s", status)}
		}
		if f.Exec != 0 {
			return f.Exec, &ExecError{f.Exec, errors.New(f.Error)}
		}
		return 0, &BoundaryError{f.Layer, errors.New(f.Error)}
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
