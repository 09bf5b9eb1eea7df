//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/landlock"
	"github.com/openoxide/oxsupervise/launcher"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/quarantine"
)

// A nested session is a session inside another one (DESIGN §8, two tiers;
// docs/agents-tiers.md): an agent's command in a tighter policy than the
// agent's. Its two halves run in two processes. The supervisor of the
// parent (outside every session, root) calls StartNested, which builds
// what only it can: the child's cgroup below the parent's, the child's
// entries in the BPF maps, the child's audit sink. The nested `run` (inside
// the parent session, with nothing left to build with) is moved into the
// child's group and calls RunNested, which starts the launcher with
// NestedSpec: that launcher stacks the child's Landlock ruleset on the
// parent's domain and execs. So the child inherits everything the parent's
// boundary is (mount namespace, seccomp, no capabilities, Landlock) and
// only narrows it; a nested `run` that skipped its steps would run with
// the parent's rules, which the kernel still holds.

// NestedOptions are the inputs of StartNested.
type NestedOptions struct {
	// Parent is the session the child runs inside; Parent.Policy is what
	// Policy was tightened from.
	Parent SessionInfo
	// Policy is the child's: policy.Tighten(Parent.Policy, request).
	Policy *policy.Compiled
	// Plan is the parent's plan: the child has the same layers (it cannot
	// build others from inside the parent), each with the child's rules.
	Plan *planner.Plan
	// Layers are the host's BPF layers the parent session has.
	Layers []SessionLayer
	// Argv and UID are the command and its user, for the records.
	Argv []string
	UID  int
	// Tier says what the child was asked as ("tier: command of
	// claude-code"), for the session_start record.
	Tier string
	// Cgroup is the session layout the parent was created in.
	Cgroup cgroup.Config
	// QuarantineDir receives the .git files the child creates that point
	// git elsewhere (BPF-LSM path); "" is quarantine.DefaultDir.
	QuarantineDir string
	Warn          io.Writer
}

// Nested is a nested session the supervisor built (StartNested): its
// group exists, its layers are applied, and nothing runs in it until the
// nested `run` is admitted.
type Nested struct {
	ID     string
	Parent string
	// parentPath is the parent's session group, where Release moves the
	// nested run back to.
	parentPath string
	group      *cgroup.Group
	info       SessionInfo
	ruleset    *launcher.Ruleset
	// bpflsm says the parent's filesystem layer, which the child has, is
	// BPF-LSM.
	bpflsm bool
	aud    *auditor
	undo   func(context.Context)
	entry  Entry
	// created is the BPF-LSM path's check of the .git files the child
	// creates, as Run's (startCreatedCheck); nil without one.
	created *quarantine.Watch

	mu      sync.Mutex
	denials []audit.Record
}

// StartNested creates a nested session: its group below the parent's
// session group (so the parent's cgroup programs, limits and cgroup.kill
// cover it), its BPF layers applied with its own rules keyed by its own
// group, and its audit sink, which names the parent in every record. A
// *BoundaryError means nothing was left behind.
func StartNested(ctx context.Context, opts NestedOptions) (*Nested, error) {
	warn := warnOrDiscard(opts.Warn)
	p, c := opts.Parent, opts.Policy
	if p.Policy == nil || c == nil || opts.Plan == nil {
		return nil, errors.New("nested session: parent policy, plan and child policy are required")
	}
	// The child's limits can only be the parent's: its group lies below
	// a group with processes, which cgroup v2 gives no controllers of its
	// own ("no internal processes"). The parent's limits cover it.
	for _, l := range []struct {
		key           string
		child, parent int64
	}{{"limits.pids_max", c.Limits.PidsMax, p.Policy.Limits.PidsMax}, {"limits.memory_max", c.Limits.MemoryMax, p.Policy.Limits.MemoryMax}} {
		if l.child != 0 && l.child != l.parent {
			return nil, &BoundaryError{Layer: LayerCgroup, Err: fmt.Errorf("%s = %d: a nested session shares its parent's limits (%d); it cannot have its own", l.key, l.child, l.parent)}
		}
	}
	var ruleset *launcher.Ruleset
	if opts.Plan.Landlock != planner.Absent {
		rs, _, err := landlock.Plan(c, opts.Plan.LandlockABI)
		if err != nil {
			return nil, &BoundaryError{Layer: LayerLandlock, Err: err}
		}
		if !rs.Empty() {
			ruleset = rs
		}
	}
	if c.Network.Policy != p.Policy.Network.Policy && !opts.Plan.Network {
		// The parent's network is held by its namespace or not at all;
		// the child's other rules need the cgroup programs.
		return nil, &BoundaryError{Layer: LayerNetwork, Err: fmt.Errorf("network %q in a session with network %q needs the cgroup network layer, which the parent session does not have", c.Network.Policy, p.Policy.Network.Policy)}
	}

	id, err := NewID()
	if err != nil {
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	cfg, err := nestedConfig(opts.Cgroup, p.CgroupPath)
	if err != nil {
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	group, err := cgroup.NewSession(cfg, id, cgroup.Limits{})
	if err != nil {
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	n := &Nested{ID: id, Parent: p.ID, parentPath: p.CgroupPath, group: group, ruleset: ruleset, bpflsm: opts.Plan.BPFLSM}
	digest, _ := c.Digest()
	n.entry = Entry{
		ID: id, Kind: KindRun, SupervisorPID: os.Getpid(), UID: opts.UID, Mode: string(c.Mode),
		Cgroup: group.Path, CgroupID: group.CgroupID, Command: opts.Argv, PolicyDigest: digest, Started: time.Now().UTC(),
	}
	n.aud = n.openAuditor(c, warn)
	n.info = SessionInfo{ID: id, CgroupPath: group.Path, CgroupID: group.CgroupID, Policy: c, Audit: n.aud.sink}
	if p.PrivateShm != nil && landlock.PrivateShmWritable(c) {
		// The nested run shares the parent's mount namespace, its
		// /dev/shm included.
		n.info.PrivateShm = p.PrivateShm
	}
	if opts.Plan.BPFLSM && c.FilesystemRules {
		w, err := quarantine.StartReported(quarantine.Options{Session: id, Policy: c, Dir: opts.QuarantineDir, Warn: warn, Report: n.aud.quarantined})
		if err != nil {
			fmt.Fprintf(warn, "oxsupervise: warning: nested session %s may not create .git files (git worktree add, submodules): %v\n", id, err)
		} else {
			n.created, n.info.Created = w, w
		}
	}
	n.undo, err = applyLayers(ctx, opts.Layers, n.info)
	if err != nil {
		n.removeGroup(warn)
		if n.created != nil {
			n.created.Close()
		}
		n.aud.close()
		return nil, err
	}
	if ruleset != nil {
		n.entry.Layers = append(n.entry.Layers, fmt.Sprintf("%s-abi%d", LayerLandlock, opts.Plan.LandlockABI))
	}
	// The nested run's launcher installs the seccomp filter again, and
	// its refusals, like Landlock's, reach only the kernel audit feed.
	if opts.Plan.KernelAudit {
		n.aud.followKernelAudit(opts.Cgroup)
	}
	for _, l := range opts.Layers {
		n.entry.Layers = append(n.entry.Layers, l.Name())
	}
	n.entry.Layers = append(n.entry.Layers, LayerCgroup)
	if opts.Tier != "" {
		n.entry.Layers = append(n.entry.Layers, opts.Tier)
	}
	return n, nil
}

// nestedConfig is the layout whose session groups are the children of
// the group at parentPath.
func nestedConfig(cfg cgroup.Config, parentPath string) (cgroup.Config, error) {
	mount := cfg.Mount
	if mount == "" {
		m, err := cgroup.Cgroup2Mount()
		if err != nil {
			return cgroup.Config{}, err
		}
		mount = m
	}
	rel, err := filepath.Rel(mount, parentPath)
	if err != nil || strings.HasPrefix(rel, "..") {
		return cgroup.Config{}, fmt.Errorf("parent session group %s is not below the cgroup2 mount %s", parentPath, mount)
	}
	return cgroup.Config{Mount: mount, Parent: rel}, nil
}

// openAuditor opens the child's own audit sink: every record written
// through it names the parent, and the child's refusals are kept for
// Finish to hand back (the reason the caller reads instead of EACCES).
func (n *Nested) openAuditor(c *policy.Compiled, warn io.Writer) *auditor {
	a := &auditor{id: n.ID, mode: string(c.Mode), warn: warn}
	// The child shares its parent's kernel audit session (its launcher
	// cannot open one): attributing by it would take the parent's
	// refusals. Its records are attributed by pid and cgroup only.
	a.auditSession.Store(-1)
	path := c.Audit.Path
	if path == "" {
		path = audit.DefaultPath
	}
	enrich := audit.ProcEnricher(50 * time.Millisecond)
	sink, err := audit.OpenFileSink(path, audit.SinkOptions{Journal: journalFor(c.Audit), Enrich: func(r *audit.Record) {
		enrich(r)
		if r.Ox.Session != n.ID {
			return
		}
		r.Ox.ParentSession = n.Parent
		if r.Ox.Kind == audit.KindDenial {
			n.mu.Lock()
			n.denials = append(n.denials, *r)
			n.mu.Unlock()
		}
	}})
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise: warning: NO AUDIT LOG for nested session %s: %v\n", n.ID, err)
		return a
	}
	a.sink = sink
	return a
}

// Info is the child's identity, as its layers were given it.
func (n *Nested) Info() SessionInfo { return n.info }

// Admit moves pid (the nested `run`, which forks the command) into the
// child's group: from then on the cgroup programs judge it by the child's
// rules.
func (n *Nested) Admit(pid int) error {
	if err := n.group.AddProcess(pid); err != nil {
		return &BoundaryError{Layer: LayerCgroup, Err: fmt.Errorf("move pid %d into nested session %s: %w", pid, n.ID, err)}
	}
	return nil
}

// Release moves pid (the nested run, its command ended) back into the
// parent's group, so that Finish kills only what the command left behind
// and the nested run lives to print the child's refusals.
func (n *Nested) Release(pid int) error {
	if err := os.WriteFile(filepath.Join(n.parentPath, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0); err != nil {
		return fmt.Errorf("move pid %d back into session %s: %w", pid, n.Parent, err)
	}
	return nil
}

// Spec is the launch spec of the child's command: argv looked up in the
// child's environment, which is env scrubbed by the child's policy (the
// command tier's credentials are gone before exec) with extra and the
// child's id set, and the child's Landlock ruleset to stack.
func (n *Nested) Spec(argv, env, extra []string, dir string) (LaunchSpec, error) {
	c := n.info.Policy
	scrubbed := ScrubEnv(env, c.Env)
	// The parent's values of what the supervisor sets are replaced.
	scrubbed = slicesDeleteEnv(scrubbed, SessionEnv)
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		scrubbed = slicesDeleteEnv(scrubbed, name)
	}
	exe, err := LookPath(argv[0], scrubbed)
	if err != nil {
		return LaunchSpec{}, &ExecError{127, err}
	}
	return LaunchSpec{
		SessionID: n.ID, Path: exe, Argv: argv, Env: append(append(scrubbed, extra...), SessionEnv+"="+n.ID), Dir: dir,
		Landlock: n.ruleset, RestrictSockets: planner.SeccompSockets(c, n.bpflsm), Nested: true,
	}, nil
}

func slicesDeleteEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Started records that the launcher of the child's command is pid, which
// must be in the child's group (it is the caller's word, checked while the
// launcher waits for its spec, so it is alive), and writes the child's
// session_start.
func (n *Nested) Started(pid int) error {
	cg, err := cgroup.CgroupOf(pid)
	if err != nil {
		return err
	}
	if cg == "/" || !strings.HasSuffix(n.group.Path, cg) {
		return fmt.Errorf("pid %d is in cgroup %s, not in nested session %s", pid, cg, n.ID)
	}
	n.aud.setLauncherPID(pid)
	n.entry.PID = pid
	cmd := strings.Join(n.entry.Command, " ")
	defer n.aud.release()
	n.aud.writeNow(audit.Record{
		Message: fmt.Sprintf("nested session %s started in session %s: %s", n.ID, n.Parent, cmd),
		Process: &audit.Process{PID: pid, CommandLine: cmd},
		User:    &audit.User{ID: fmt.Sprint(n.entry.UID)},
		Ox: audit.Ox{Kind: audit.KindSessionStart, Session: n.ID, Layer: audit.LayerSupervisor,
			Mode: n.entry.Mode, PolicyDigest: n.entry.PolicyDigest, Rule: "layers: " + strings.Join(n.entry.Layers, ",")},
	})
	return nil
}

// Finish ends the child: whatever is left in its group is killed, the
// group removed, its layers' rules dropped, its kernel audit records
// drained and session_stop written. It returns the child's refusals.
func (n *Nested) Finish(code int, err error) []audit.Record {
	warn := warnOrDiscard(n.aud.warn)
	n.removeGroup(warn)
	tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n.undo(tctx)
	cancel()
	if n.created != nil {
		// The layers handed over every report: the end's check.
		n.created.Close()
	}
	n.aud.sessionStop(&n.entry, code, err)
	if n.aud.stop != nil {
		n.aud.stop.Ox.ParentSession = n.Parent
	}
	n.aud.close()
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]audit.Record(nil), n.denials...)
}

func (n *Nested) removeGroup(warn io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := os.Stat(n.group.Path); err != nil {
		return // the parent's end (stop, cgroup.kill) removed it
	}
	if err := n.group.Kill(ctx); err != nil {
		fmt.Fprintf(warn, "oxsupervise: nested session %s: %v\n", n.ID, err)
	}
	if err := n.group.Remove(ctx); err != nil {
		fmt.Fprintf(warn, "oxsupervise: nested session %s: %v\n", n.ID, err)
	}
}

// RunNested is the nested `run`'s half: already in the child's group
// (Admit), it starts the launcher with spec, calls started with the
// launcher's pid before the launcher has the spec (it cannot run anything
// yet; an error kills it), and waits for the command. A *BoundaryError means
// the command did not run.
func RunNested(ctx context.Context, spec LaunchSpec, stdin, stdout, stderr *os.File, started func(pid int) error) (int, error) {
	specR, specW, err := os.Pipe()
	if err != nil {
		return 0, &BoundaryError{Layer: LayerLandlock, Err: err}
	}
	defer specR.Close()
	defer specW.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return 0, &BoundaryError{Layer: LayerLandlock, Err: err}
	}
	defer statusR.Close()
	defer statusW.Close()
	// Pdeathsig is the forking thread's: the command dies with this run.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	x, err := launcherCommand("", []*os.File{specR, statusW})
	if err != nil {
		return 0, err
	}
	defer x.close()
	cmd := x.cmd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, &BoundaryError{Layer: LayerLandlock, Err: fmt.Errorf("start the nested launcher: %w", err)}
	}
	specR.Close()
	statusW.Close()
	// Before the spec: the launcher waits for it, so the supervisor
	// checks a live process of the child's group, whatever the command
	// does once it runs.
	if started != nil {
		if err := started(cmd.Process.Pid); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return 0, &BoundaryError{Layer: LayerCgroup, Err: err}
		}
	}
	_, werr := specW.Write(specBytes(spec))
	specW.Close()
	status, _ := io.ReadAll(statusR)
	if werr != nil || len(status) > 0 {
		cmd.Wait()
		if werr != nil {
			return 0, &BoundaryError{Layer: LayerLandlock, Err: fmt.Errorf("send launch spec: %w", werr)}
		}
		return launchFailed(status, LayerLandlock)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				if (s == unix.SIGINT || s == unix.SIGQUIT) && sameForegroundGroup() {
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
	return 0, fmt.Errorf("wait for nested session %s: %w", spec.SessionID, err)
}
