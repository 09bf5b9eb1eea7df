//go:build linux

package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// exec runs an approved command outside the caller's session (DESIGN §2,
// escape hatch). The session is the one the caller's cgroup is in; its
// policy is the one the daemon compiled for it.
func (s *Server) exec(w http.ResponseWriter, r *http.Request, who *caller) {
	sid, m := who.session, who.managed
	var req ExecRequest
	stdio, err := decodeWithStdio(r, &req)
	if err != nil {
		writeError(w, err)
		return
	}
	defer stdio.close()
	c := m.policy
	command := shellJoin(req.Argv)
	kind := KindUnsandboxedCommand
	pattern := command
	for _, x := range c.ExcludedCommands {
		if filepath.Base(req.Argv[0]) == x {
			kind = KindExcludedCommand
			pattern = policy.PrefixPattern([]string{x}) // "docker *"
		}
	}
	id := newApprovalID()
	s.auditApproval(sid, m, id, "pending", command, "request to run outside the sandbox ("+kind+")")
	if !c.AllowUnsandboxedCommands {
		reason := "allow_unsandboxed_commands = false: commands never run outside the sandbox"
		s.auditApproval(sid, m, id, "reject", command, reason)
		writeError(w, errorf(http.StatusForbidden, "forbidden", "%s", reason))
		return
	}
	es := newEventStream(w)
	decision := ""
	stored, rerr := readApprovals(m.cred, m.workspace)
	if rerr != nil {
		es.send(Event{Event: "warning", Message: fmt.Sprintf("approvals file ignored: %v", rerr)})
	}
	for _, a := range stored {
		if a.Kind == kind && patternMatches(a.Pattern, req.Argv) {
			decision = "always"
			s.auditApproval(sid, m, id, "always", command, "approved earlier with --always (pattern "+a.Pattern+")")
		}
	}
	if decision == "" {
		pa, n := s.pending.add(Approval{ID: id, Kind: kind, Session: sid, UID: m.cred.UID, Command: req.Argv, Dir: req.Dir,
			Pattern: pattern, Created: time.Now().UTC(), Expires: time.Now().UTC().Add(s.opts.ApprovalTimeout)})
		if pa == nil {
			reason := fmt.Sprintf("session %s already has %d requests waiting for an answer", sid, n)
			s.auditApproval(sid, m, id, "reject", command, reason)
			es.send(Event{Event: "rejected", Approval: id, Code: 1, Message: reason})
			return
		}
		es.send(Event{Event: "pending", Session: sid, Approval: id,
			Message: fmt.Sprintf("waiting for approval: oxsupervise approve %s --once|--always|--reject", id)})
		decision = s.pending.await(r.Context(), pa, s.opts.ApprovalTimeout)
		switch decision {
		case ReplyAlways:
			err := appendApproval(m.cred, m.workspace, storedApproval{Kind: kind, Pattern: pattern, ApprovedBy: m.cred.UID, Time: time.Now().UTC().Truncate(time.Second)})
			if err != nil {
				es.send(Event{Event: "warning", Message: fmt.Sprintf("approved, but not remembered: %s: %v", filepath.Join(m.workspace, ApprovalsFile), err)})
			}
			s.auditApproval(sid, m, id, "always", command, "approved; remembered as "+pattern)
		case ReplyOnce:
			s.auditApproval(sid, m, id, "once", command, "approved once")
		default:
			reason := "rejected"
			if decision == decisionTimeout {
				reason = fmt.Sprintf("no answer within %s; refused", s.opts.ApprovalTimeout)
			} else if decision == decisionAbandoned {
				reason = "the requesting client went away"
			}
			s.auditApproval(sid, m, id, "reject", command, reason)
			es.send(Event{Event: "rejected", Approval: id, Code: 1, Message: reason})
			return
		}
	}
	es.send(Event{Event: "approved", Approval: id, Message: decision})
	code, err := s.runOutside(r.Context(), m, &req, stdio)
	msg := fmt.Sprintf("unsandboxed command exited with status %d", code)
	if err != nil {
		msg = err.Error()
		es.send(Event{Event: "error", Approval: id, Code: code, Message: msg})
	} else {
		es.send(Event{Event: "exit", Approval: id, Code: code})
	}
	s.auditApproval(sid, m, id, decision, command, msg)
}

// runOutside runs an approved command as the session's user, outside any
// session, wired to the caller's stdio.
func (s *Server) runOutside(ctx context.Context, m *managed, req *ExecRequest, stdio stdio) (int, error) {
	env := session.UserEnv(req.Env, &session.EnvUser{Home: m.home, Name: m.userName})
	path, err := session.LookPath(req.Argv[0], env)
	if err != nil {
		return 127, err
	}
	groups := make([]uint32, len(m.cred.Groups))
	for i, g := range m.cred.Groups {
		groups[i] = uint32(g)
	}
	cmd := exec.Command(path, req.Argv[1:]...)
	cmd.Args[0] = req.Argv[0]
	cmd.Env, cmd.Dir = env, req.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio[0], stdio[1], stdio[2]
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(m.cred.UID), Gid: uint32(m.cred.GID), Groups: groups},
		Setsid:     true,
	}
	if err := cmd.Start(); err != nil {
		return 126, fmt.Errorf("start %s: %w", req.Argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			// The asking process went away: so does its command.
			unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		case <-done:
		}
	}()
	err = cmd.Wait()
	close(done)
	if code, ok := session.ExitStatus(err); ok {
		return code, nil
	}
	return 1, err
}
