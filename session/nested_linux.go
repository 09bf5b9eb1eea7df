//go:build linux

package session

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

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/kernelaudit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/phasetime"
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
// the parent session, with nothing left to build with) starts the
// launcher first (StartNestedLauncher); the supervisor moves that launcher
// into the child's group (ReserveNested, NestedGroup.Admit) and answers
// with its spec meanwhile, and the launcher stacks the child's Landlock
// ruleset on the parent's domain during the move and execs once the
// supervisor admits it (Started: the move verified, session_start
// written). So the child inherits everything the parent's boundary is
// (mount namespace, seccomp, no capabilities, Landlock) and only narrows
// it; a nested `run` that skipped its steps would run with the parent's
// rules, which the kernel still holds.

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
	// Group is the child's group, its launcher on its way in
	// (ReserveNested); StartNested owns it from then on, and removes it
	// when it fails.
	Group *NestedGroup
	// QuarantineDir receives the .git files the child creates that point
	// git elsewhere (BPF-LSM path); "" is quarantine.DefaultDir.
	QuarantineDir string
	Warn          io.Writer
	// Timing, when set, is told when each phase of the child's end is
	// done (OXSUPERVISE_DEBUG_TIMING).
	Timing *phasetime.Recorder
}

// Nested is a nested session the supervisor built (StartNested): its
// group exists, its layers are applied, and its launcher is on its way
// into its group, given its spec or waiting for it, and held at its exec
// gate until Started admits it.
type Nested struct {
	ID      string
	Parent  string
	info    SessionInfo
	ruleset *launcher.Ruleset
	// bpflsm says the parent's filesystem layer, which the child has, is
	// BPF-LSM.
	bpflsm bool
	aud    *auditor
	undo   func(context.Context)
	entry  Entry
	tm     *phasetime.Recorder
	g      *NestedGroup
	// created is the BPF-LSM path's check of the .git files the child
	// creates, as Run's (startCreatedCheck); nil without one.
	created *quarantine.Watch

	mu      sync.Mutex
	denials []audit.Record
}

// NestedGroup is the group of a nested session about to be built
// (ReserveNested): it exists below the parent's, and the launcher of the
// child's command is being moved into it.
type NestedGroup struct {
	ID     string
	parent string
	group  *cgroup.Group
	// launcher is the pid being moved in (Admit): session_start names
	// it.
	launcher int
	// parentPath and mount are the parent's group and the cgroup2 mount.
	parentPath, mount string
	// aud is the child's auditor, made here so that its kernel audit
	// reader opens (reader and readerErr, once opened is closed) while
	// the child's policy is compiled; StartNested gives aud its sink and
	// takes the reader.
	aud       *auditor
	layout    cgroup.Config
	opened    chan struct{}
	reader    *kernelaudit.Reader
	readerErr error
	taken     bool
	// hub, when set, is the supervisor's shared reader, which the child
	// subscribes to instead of opening a reader of its own.
	hub *kernelaudit.Hub
	// admitted is the move of the launcher into the group, which runs
	// while the supervisor prepares the rest (Admitted waits for it);
	// nil until Admit.
	admitted  chan error
	admitOnce sync.Once
	admitErr  error
}

// ReserveNested creates the group of a nested session of parent, a
// layout of cfg, as soon as its nested run has connected (before its
// request, which names its launcher: Admit). The launcher's move into the
// group waits for an RCU grace period (the write side of
// cgroup_threadgroup_rwsem, ~7 ms after a quiet spell) unless one has just
// passed: ReserveNested starts one now, with a migration that moves
// nothing (cgroup.MigrateSelfInPlace), while the nested run starts its
// launcher and sends its request, so the move finds it passed. Nothing of
// the command runs before Started verified the move: the launcher waits at
// its exec gate until then. StartNested takes the group, or Discard
// removes it. With plan.KernelAudit, the child's kernel audit reader opens
// meanwhile too (a round trip to the audit subsystem: 0.2-5 ms on a busy
// machine), unless hub, the supervisor's shared reader, is given: the
// child then subscribes to it.
func ReserveNested(parent SessionInfo, plan *planner.Plan, layout cgroup.Config, hub *kernelaudit.Hub) (*NestedGroup, error) {
	id, err := NewID()
	if err != nil {
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	cfg, err := nestedConfig(layout, parent.CgroupPath)
	if err != nil {
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	group, err := cgroup.NewSession(cfg, id, cgroup.Limits{})
	if err != nil {
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	// After the group's mkdir, which would wait for it (cgroup_mutex).
	// Only a cost: a move that finds no grace period passed waits for
	// one of its own.
	go cgroup.MigrateSelfInPlace(cfg.Mount)
	g := &NestedGroup{ID: id, parent: parent.ID, parentPath: parent.CgroupPath, mount: cfg.Mount, group: group,
		aud: newNestedAuditor(id), layout: layout, opened: make(chan struct{}), hub: hub}
	if plan != nil && plan.KernelAudit && hub == nil {
		go func() {
			defer close(g.opened)
			g.reader, g.readerErr = g.aud.openKernelAudit(layout)
		}()
	} else {
		close(g.opened)
	}
	return g, nil
}

// Admit starts moving launcher (the launcher of the child's command, in
// the parent's group and waiting for its spec: StartNestedLauncher; the
// caller checked it is the nested run's child) into the group. The move
// runs while the caller compiles the child's policy and StartNested
// builds the rest; Admitted waits for it. Call it once, before
// StartNested.
func (g *NestedGroup) Admit(launcher int) {
	g.launcher = launcher
	g.admitted = make(chan error, 1)
	go func() { g.admitted <- g.admit(g.mount, g.parentPath, launcher) }()
}

// takeReader waits for the child's kernel audit reader (opened now if
// ReserveNested's plan had none) and hands it over: its owner closes it
// from then on.
func (g *NestedGroup) takeReader() (*kernelaudit.Reader, error) {
	<-g.opened
	g.taken = true
	if g.reader == nil && g.readerErr == nil {
		return g.aud.openKernelAudit(g.layout)
	}
	return g.reader, g.readerErr
}

// admit moves pid (the child's launcher) from the parent's group, at
// parentPath below mount, into the child's: from then on the cgroup
// programs judge it by the child's rules. Only a process of the parent's
// own group is moved (a process of another nested session is not the
// caller's to move), so the move only ever tightens. The nested run
// itself stays in the parent's group: Settle kills only the command's
// processes, and the run lives to print the child's refusals.
func (g *NestedGroup) admit(mount, parentPath string, pid int) error {
	fail := func(err error) error {
		return &BoundaryError{Layer: LayerCgroup, Err: fmt.Errorf("move the launcher (pid %d) into nested session %s: %w", pid, g.ID, err)}
	}
	if pid <= 0 {
		return fail(errors.New("no launcher"))
	}
	cg, err := cgroup.CgroupOf(pid)
	if err != nil {
		return fail(err)
	}
	if filepath.Join(mount, cg) != filepath.Clean(parentPath) {
		return fail(fmt.Errorf("it is in cgroup %s, not in session %s", cg, g.parent))
	}
	if err := g.group.AddProcess(pid); err != nil {
		return fail(err)
	}
	return nil
}

// Admitted waits for the launcher's move into the group and returns its
// result (an error when Admit was not called).
func (g *NestedGroup) Admitted() error {
	g.admitOnce.Do(func() {
		if g.admitted == nil {
			g.admitErr = &BoundaryError{Layer: LayerCgroup, Err: fmt.Errorf("nested session %s: no launcher was moved into its group", g.ID)}
			return
		}
		g.admitErr = <-g.admitted
	})
	return g.admitErr
}

// Discard removes a group StartNested did not take (the request was
// refused), killing the launcher moved into it, if one was.
func (g *NestedGroup) Discard(warn io.Writer) {
	g.Admitted() // done with the group before it is removed
	if <-g.opened; !g.taken && g.reader != nil {
		g.reader.Close()
	}
	removeGroup(g.ID, g.group, warnOrDiscard(warn))
}

// StartNested creates a nested session in the group ReserveNested made
// below the parent's session group (so the parent's cgroup programs,
// limits and cgroup.kill cover it): its BPF layers applied with its own
// rules keyed by its own group, and its audit sink, which names the parent
// in every record. An error means nothing was left behind (the group is
// discarded).
func StartNested(ctx context.Context, opts NestedOptions) (*Nested, error) {
	warn := warnOrDiscard(opts.Warn)
	p, c, g := opts.Parent, opts.Policy, opts.Group
	if p.Policy == nil || c == nil || opts.Plan == nil || g == nil || g.admitted == nil {
		if g != nil {
			g.Discard(warn)
		}
		return nil, errors.New("nested session: parent policy, plan, child policy and group (its launcher admitted) are required")
	}
	n := &Nested{ID: g.ID, Parent: p.ID, bpflsm: opts.Plan.BPFLSM, tm: opts.Timing, g: g}
	fail := func(err error) (*Nested, error) {
		g.Discard(warn)
		return nil, err
	}
	// The child's limits can only be the parent's: its group lies below
	// a group with processes, which cgroup v2 gives no controllers of its
	// own ("no internal processes"). The parent's limits cover it.
	for _, l := range []struct {
		key           string
		child, parent int64
	}{{"limits.pids_max", c.Limits.PidsMax, p.Policy.Limits.PidsMax}, {"limits.memory_max", c.Limits.MemoryMax, p.Policy.Limits.MemoryMax}} {
		if l.child != 0 && l.child != l.parent {
			return fail(&BoundaryError{Layer: LayerCgroup, Err: fmt.Errorf("%s = %d: a nested session shares its parent's limits (%d); it cannot have its own", l.key, l.child, l.parent)})
		}
	}
	if c.Network.Policy != p.Policy.Network.Policy && !opts.Plan.Network {
		// The parent's network is held by its namespace or not at all;
		// the child's other rules need the cgroup programs.
		return fail(&BoundaryError{Layer: LayerNetwork, Err: fmt.Errorf("network %q in a session with network %q needs the cgroup network layer, which the parent session does not have", c.Network.Policy, p.Policy.Network.Policy)})
	}
	id, group := g.ID, g.group
	var err error
	digest, _ := c.Digest()
	n.entry = Entry{
		ID: id, Kind: KindRun, SupervisorPID: os.Getpid(), UID: opts.UID, Mode: string(c.Mode),
		Cgroup: group.Path, CgroupID: group.CgroupID, Command: opts.Argv, PolicyDigest: digest, Started: time.Now().UTC(),
	}
	n.aud = n.openAuditor(g.aud, c, warn, g.launcher)
	n.tm.Mark("nested: audit sink")
	if opts.Plan.Landlock != planner.Absent {
		rs, _, err := landlock.Plan(c, opts.Plan.LandlockABI)
		if err != nil {
			g.Discard(warn)
			n.aud.close()
			return nil, &BoundaryError{Layer: LayerLandlock, Err: err}
		}
		if !rs.Empty() {
			n.ruleset = rs
		}
	}
	n.tm.Mark("nested: Landlock plan")
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
		g.Discard(warn)
		if n.created != nil {
			n.created.Close()
		}
		n.aud.close()
		return nil, err
	}
	n.tm.Mark("nested: layers applied")
	if n.ruleset != nil {
		n.entry.Layers = append(n.entry.Layers, fmt.Sprintf("%s-abi%d", LayerLandlock, opts.Plan.LandlockABI))
	}
	// The nested run's launcher installs the seccomp filter again, and
	// its refusals, like Landlock's, reach only the kernel audit feed:
	// its reader opened with the group (or the supervisor's shared one),
	// and is followed from here on, before the launcher has its spec.
	switch {
	case opts.Plan.KernelAudit && g.hub != nil:
		n.aud.followHub(g.hub)
		n.tm.Mark("nested: kernel audit subscribed")
	case opts.Plan.KernelAudit:
		n.aud.followReader(g.takeReader())
		n.tm.Mark("nested: kernel audit followed")
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

// newNestedAuditor is the auditor of nested session id, before its sink.
func newNestedAuditor(id string) *auditor {
	a := &auditor{id: id}
	// The child shares its parent's kernel audit session (its launcher
	// cannot open one): attributing by it would take the parent's
	// refusals. Its records are attributed by pid and cgroup only.
	a.auditSession.Store(-1)
	return a
}

// openAuditor opens the child's own audit sink: every record written
// through it names the parent, and the child's refusals are kept for
// Settle to hand back (the reason the caller reads instead of EACCES).
func (n *Nested) openAuditor(a *auditor, c *policy.Compiled, warn io.Writer, launcher int) *auditor {
	a.mode, a.warn = string(c.Mode), warn
	path := c.Audit.Path
	if path == "" {
		path = audit.DefaultPath
	}
	enrich := audit.NewEnricher(50 * time.Millisecond)
	sink, err := audit.OpenFileSink(path, audit.SinkOptions{Journal: journalFor(c.Audit), Enrich: func(r *audit.Record) {
		enrich.Enrich(r)
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
	// session_start names the launcher and its ancestry (the nested run,
	// the parent session's processes, their supervisor): read them now,
	// while the rest is built, not between the launcher's move and its
	// spec (~1 ms of /proc reads, issue 18). The launcher waits for its
	// spec until then: what /proc says of it does not change.
	if launcher > 0 {
		go enrich.Prefetch(launcher)
	}
	return a
}

// Admitted waits for the launcher's move into the group and returns its
// result.
func (n *Nested) Admitted() error { return n.g.Admitted() }

// Info is the child's identity, as its layers were given it.
func (n *Nested) Info() SessionInfo { return n.info }

// Spec is the launch spec of the child's command: argv looked up in the
// child's environment, which is env scrubbed by the child's policy (the
// command tier's credentials are gone before exec) with extra and the
// child's id set, and the child's Landlock ruleset to stack. It is gated:
// the nested run hands it to the launcher before Started (the launcher
// sets itself up during its move) and opens the exec gate only once
// Started succeeded.
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
		// The spec goes out while the launcher is moved into the
		// child's group: it execs once the move is verified (Started).
		ExecGate: true,
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
// must be in the child's group (checked while the launcher waits at its
// exec gate, which the caller confirms alive by its pidfd afterwards), and
// writes the child's session_start. Only then may the gate open.
func (n *Nested) Started(pid int) error {
	if err := n.Admitted(); err != nil {
		return err
	}
	cg, err := cgroup.CgroupOf(pid)
	if err != nil {
		return err
	}
	if cg == "/" || !strings.HasSuffix(n.g.group.Path, cg) {
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

// Settle ends the child, which ended with code (or err): whatever is
// left in its group is killed and the group removed, its kernel audit
// records and its layers' reports drained and their rules dropped, and
// session_stop written (its sync started). From then on the audit log
// holds every record of the child. It returns the child's refusals, for
// the nested run's answer; Release, after that answer, frees the rest
// and waits for the sync.
func (n *Nested) Settle(code int, err error) []audit.Record {
	warn := warnOrDiscard(n.aud.warn)
	g := n.g
	g.Admitted() // done with the group before it is removed
	exists := killGroup(n.ID, g.group, warn)
	// Every process of the child is gone (or was before: the parent's
	// end, stop): its refusals are queued in the kernel. The kernel audit
	// drain, the removal of the group and the layers' drains run side
	// by side.
	n.aud.endKernelAudit()
	removed := make(chan struct{})
	go func() {
		defer close(removed)
		if exists {
			dropGroup(n.ID, g.group, warn)
		}
	}()
	n.tm.Mark("nested: group killed")
	tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n.undo(tctx)
	cancel()
	n.tm.Mark("nested: layers undone")
	if n.created != nil {
		// The layers handed over every report: the end's check.
		n.created.Close()
	}
	<-removed
	stop := stopRecord(&n.entry, code, err)
	stop.Ox.ParentSession = n.Parent
	n.aud.settle(stop)
	n.tm.Mark("nested: audit closed")
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]audit.Record(nil), n.denials...)
}

// Release frees what the settled child still holds in this process: its
// kernel audit feed and its audit sink, once session_stop is synced.
func (n *Nested) Release() {
	n.aud.close()
	n.tm.Mark("nested: released")
}

// removeGroup kills what is left in a nested session's group and
// removes it.
func removeGroup(id string, group *cgroup.Group, warn io.Writer) {
	if killGroup(id, group, warn) {
		dropGroup(id, group, warn)
	}
}

// killGroup kills every process left in a nested session's group and
// waits until it is empty; false when the group is gone already (the
// parent's end, stop, removed it).
func killGroup(id string, group *cgroup.Group, warn io.Writer) bool {
	if _, err := os.Stat(group.Path); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := group.Kill(ctx); err != nil {
		fmt.Fprintf(warn, "oxsupervise: nested session %s: %v\n", id, err)
	}
	return true
}

// dropGroup removes a nested session's emptied group.
func dropGroup(id string, group *cgroup.Group, warn io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := group.Remove(ctx); err != nil {
		fmt.Fprintf(warn, "oxsupervise: nested session %s: %v\n", id, err)
	}
}
