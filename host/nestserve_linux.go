//go:build linux

package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/internal/procfs"
	"github.com/openoxide/oxsupervise/launcher"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// One nested run's request, as the nest server (nest_linux.go) serves it:
// who asks (authorize: the caller's cgroup, never the request), its
// launcher (a child of the caller), the child built, its gated spec
// answered, the launcher admitted, and the child's end.

// peer is the process on the other end of conn, pinned by a pidfd, and
// the session (served here) it asks in.
type peer struct {
	pid, uid int
	pidfd    int
	parent   session.SessionInfo
}

func (p *peer) alive() bool { return unix.PidfdSendSignal(p.pidfd, 0, nil, 0) == nil }

// pinned is a process pinned by a pidfd.
type pinned struct {
	pid, pidfd int
}

func (l *pinned) alive() bool { return unix.PidfdSendSignal(l.pidfd, 0, nil, 0) == nil }

// child pins pid, which must be a child of the peer: the launcher of its
// command. Its group is NestedGroup.Admit's to check.
func (p *peer) child(pid int) (*pinned, error) {
	if pid <= 0 {
		return nil, errors.New("no launcher pid (the nested run is of another version than its supervisor)")
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd of pid %d: %w", pid, err)
	}
	// One read of pid's own stat, not the children of each of the
	// peer's threads: its parent is the peer's thread group either way.
	st, err := procfs.ReadStat(pid)
	// Read the parent, then check the pidfd: pid was the pinned
	// process, not a successor's.
	if err == nil && st.PPID != p.pid {
		err = fmt.Errorf("pid %d is not a child of pid %d", pid, p.pid)
	}
	if err == nil && unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil {
		err = fmt.Errorf("pid %d exited", pid)
	}
	if err != nil {
		unix.Close(pidfd)
		return nil, err
	}
	return &pinned{pid: pid, pidfd: pidfd}, nil
}

func (s *nestServer) authorize(conn *net.UnixConn) (*peer, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil {
		return nil, fmt.Errorf("peer credentials: %w", cerr)
	}
	pidfd, err := unix.PidfdOpen(int(cred.Pid), 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd of pid %d: %w", cred.Pid, err)
	}
	p := &peer{pid: int(cred.Pid), uid: int(cred.Uid), pidfd: pidfd}
	chain, err := cgroup.SessionChain(s.cfg, p.pid)
	// Read the cgroup, then check the pidfd: the cgroup read was the
	// pinned process's, not a successor's with the same pid.
	if err == nil && !p.alive() {
		err = fmt.Errorf("pid %d exited", p.pid)
	}
	if err != nil {
		unix.Close(pidfd)
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(chain) == 0 || chain[0] != s.root {
		unix.Close(pidfd)
		return nil, fmt.Errorf("pid %d is not in session %s", p.pid, s.root)
	}
	info, ok := s.sessions[chain[len(chain)-1]]
	if !ok {
		unix.Close(pidfd)
		return nil, fmt.Errorf("pid %d is in session %s, which is not served here", p.pid, chain[len(chain)-1])
	}
	p.parent = info
	return p, nil
}

func (s *nestServer) serve(conn *net.UnixConn) {
	enc, dec := json.NewEncoder(conn), json.NewDecoder(io.LimitReader(conn, 4<<20))
	refuse := func(code int, err error) { enc.Encode(NestAnswer{Error: err.Error(), Code: code}) }
	var tm *phasetime.Recorder
	if s.timing {
		tm = phasetime.New(s.warn)
	}
	p, err := s.authorize(conn)
	if err != nil {
		refuse(125, fmt.Errorf("not authorized: %w", err))
		return
	}
	defer unix.Close(p.pidfd)
	tm.Mark("nested: peer authorized")
	// The group first, before the request: it also starts the RCU grace
	// period the launcher's move waits for, while the nested run starts
	// its launcher and sends the request naming it.
	group, err := session.ReserveNested(p.parent, s.plan, s.cfg, s.kaudit)
	if err != nil {
		refuse(session.FailureOf(err).Code, err)
		return
	}
	tm.Mark("nested: group reserved")
	refuseReserved := func(code int, err error) {
		group.Discard(s.warn)
		refuse(code, err)
	}
	var req NestRequest
	if err := dec.Decode(&req); err != nil {
		refuseReserved(125, fmt.Errorf("bad request: %w", err))
		return
	}
	tm.Mark("nested: request read")
	if len(req.Argv) == 0 || !filepath.IsAbs(req.Dir) {
		refuseReserved(2, errors.New("bad request: no command, or a relative directory"))
		return
	}
	if !req.ExecGate {
		refuseReserved(125, errors.New("bad request: the nested run does not hold its launcher at an exec gate (it is of another version than its supervisor)"))
		return
	}
	pinnedLauncher, err := p.child(req.Launcher)
	if err != nil {
		refuseReserved(125, fmt.Errorf("bad request: launcher: %w", err))
		return
	}
	defer unix.Close(pinnedLauncher.pidfd)
	// The launcher's move (a wait of its own, unless the grace period
	// started with the group has passed) runs while the request is
	// compiled and the session built, and while the launcher sets itself
	// up with the spec answered below.
	group.Admit(pinnedLauncher.pid)
	tm.Mark("nested: launcher move started")
	request, warnings, err := s.opts.Request(p.parent.Policy, req)
	if err != nil {
		refuseReserved(2, fmt.Errorf("policy: %w", err))
		return
	}
	child, err := policy.Tighten(p.parent.Policy, request)
	if err != nil {
		refuseReserved(125, fmt.Errorf("a nested session cannot be looser than session %s:\n%w", p.parent.ID, err))
		return
	}
	tm.Mark("nested: policy")
	tier := ""
	if req.Tier != "" {
		agent := req.Agent
		if agent == "" && p.parent.Policy.Agent != nil {
			agent = p.parent.Policy.Agent.Name
		}
		tier = "tier: " + req.Tier + " of " + agent
	}
	n, err := session.StartNested(context.Background(), session.NestedOptions{
		Parent: p.parent, Policy: child, Plan: s.plan, Layers: s.h.Layers(s.plan),
		Argv: req.Argv, UID: p.uid, Tier: tier, Cgroup: s.cfg, Warn: s.warn, Group: group, Timing: tm,
	})
	if err != nil {
		refuse(session.FailureOf(err).Code, err)
		return
	}
	c := &nestChild{n: n}
	s.mu.Lock()
	s.children[n.ID] = c
	s.sessions[n.ID] = n.Info()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.children, n.ID)
		delete(s.sessions, n.ID)
		s.mu.Unlock()
	}()
	spec, err := n.Spec(req.Argv, req.Env, []string{NestEnv + "=" + s.path}, req.Dir)
	if err != nil {
		c.finish(-1, err)
		refuse(session.FailureOf(err).Code, err)
		return
	}
	// The launcher gets its (gated) spec now, while it is moved into the
	// child's group: it sets itself up during the move, and execs only
	// once the second answer admits it.
	if err := enc.Encode(NestAnswer{Session: n.ID, Parent: p.parent.ID, Spec: launcher.EncodeSpec(spec), Warnings: warnings}); err != nil {
		c.finish(-1, err)
		return
	}
	tm.Mark("nested: spec sent")
	// The pid moved was the pinned launcher's: still alive after the
	// move, and in the child's group (Started). Until then its exec gate
	// stays shut: a refusal here is the answer, and the nested run kills
	// the launcher, which ran nothing.
	err = n.Admitted()
	tm.Mark("nested: launcher moved into the group")
	if err == nil && !pinnedLauncher.alive() {
		err = fmt.Errorf("the launcher (pid %d) exited", pinnedLauncher.pid)
	}
	if err == nil {
		err = n.Started(pinnedLauncher.pid)
	}
	if err == nil && !p.alive() {
		err = fmt.Errorf("pid %d exited", p.pid)
	}
	if err != nil {
		c.finish(-1, err)
		refuse(session.FailureOf(err).Code, err)
		return
	}
	tm.Mark("nested: session_start")
	if err := enc.Encode(NestAnswer{Session: n.ID, Parent: p.parent.ID, Admitted: true}); err != nil {
		c.finish(-1, err)
		return
	}
	code, runErr := -1, error(errors.New("the nested run went away before its command ended"))
	for {
		var r NestReport
		if err := dec.Decode(&r); err != nil {
			break
		}
		if r.Exit != nil {
			tm.Mark("nested: command exited")
			code, runErr = *r.Exit, nil
			break
		}
	}
	// The nested run is answered once the child has settled (its
	// records, session_stop last, are in the log), and the child is
	// released afterwards.
	recs := c.settle(code, runErr)
	if runErr == nil {
		enc.Encode(NestAnswer{Session: n.ID, Parent: p.parent.ID, Records: recs})
		tm.Mark("nested: answered")
	}
	c.finish(code, runErr)
}
