//go:build linux

package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/openoxide/oxsupervise/egress"
)

// askHostname is the network layer's approver (egress.AskFunc): a session
// whose policy says unknown_hosts = "ask" looked up a name no rule allows.
// A name approved --always for the workspace is answered at once;
// otherwise the lookup is listed in GET /permission until it is answered
// or ctx (the policy's ask_timeout_seconds) ends.
func (s *Server) askHostname(ctx context.Context, q egress.HostnameAsk) (egress.AskReply, string) {
	m := s.sessionByCgroup(ctx, q.CgroupID)
	if m == nil {
		// Not a session this daemon created or attached: nobody here
		// knows whom to ask.
		return egress.AskReject, egress.ReasonNoApprover
	}
	id := newApprovalID()
	s.auditApproval(m.id, m, id, "pending", q.Name, "DNS lookup of a name no network.allow entry matches ("+KindHostname+")")
	stored, err := readApprovals(m.cred, m.workspace)
	if err != nil {
		s.log.Printf("session %s: approvals file ignored: %v", m.id, err)
	}
	for _, a := range stored {
		if a.Kind == KindHostname && strings.EqualFold(strings.TrimSuffix(a.Pattern, "."), q.Name) {
			s.auditApproval(m.id, m, id, "always", q.Name, "approved earlier with --always (host "+a.Pattern+")")
			return egress.AskAlways, ""
		}
	}
	now := time.Now().UTC()
	expires := now.Add(s.opts.ApprovalTimeout)
	if d, ok := ctx.Deadline(); ok {
		expires = d.UTC()
	}
	pa, n := s.pending.add(Approval{ID: id, Kind: KindHostname, Session: m.id, UID: m.cred.UID, Command: []string{}, Host: q.Name,
		Pattern: q.Name, Created: now, Expires: expires})
	if pa == nil {
		reason := fmt.Sprintf("session %s already has %d requests waiting for an answer", m.id, n)
		s.auditApproval(m.id, m, id, "reject", q.Name, reason)
		return egress.AskReject, egress.ReasonAskBusy
	}
	s.log.Printf("session %s: DNS lookup of %s waits for approval %s", m.id, q.Name, id)
	// ctx is the lookup's own deadline (ask_timeout_seconds): its end is
	// the timeout.
	decision := s.pending.await(ctx, pa, 0)
	switch decision {
	case ReplyAlways:
		err := appendApproval(m.cred, m.workspace, storedApproval{Kind: KindHostname, Pattern: q.Name, ApprovedBy: m.cred.UID, Time: time.Now().UTC().Truncate(time.Second)})
		if err != nil {
			s.log.Printf("session %s: host %s approved, but not remembered: %s: %v", m.id, q.Name, filepath.Join(m.workspace, ApprovalsFile), err)
		}
		s.auditApproval(m.id, m, id, "always", q.Name, "approved; remembered for the workspace")
		return egress.AskAlways, ""
	case ReplyOnce:
		s.auditApproval(m.id, m, id, "once", q.Name, "approved once")
		return egress.AskOnce, ""
	case decisionAbandoned:
		s.auditApproval(m.id, m, id, "reject", q.Name, "no answer before the lookup's deadline; refused")
		return egress.AskReject, egress.ReasonAskTimeout
	}
	s.auditApproval(m.id, m, id, "reject", q.Name, "rejected")
	return egress.AskReject, egress.ReasonAskRejected
}

// sessionByCgroup finds the daemon session whose cgroup id is cgroupID. An
// attach session's processes can query before the daemon has recorded the
// session (session.Attach applies the layers first), and adopted sessions
// carry no cgroup id: both are found by waiting briefly and through the
// registry.
func (s *Server) sessionByCgroup(ctx context.Context, cgroupID uint64) *managed {
	for try := 0; ; try++ {
		var unknown []*managed
		s.mu.Lock()
		for _, m := range s.sessions {
			if m.cgroupID == cgroupID {
				s.mu.Unlock()
				return m
			}
			if m.cgroupID == 0 {
				unknown = append(unknown, m)
			}
		}
		s.mu.Unlock()
		for _, m := range unknown {
			if e, err := s.opts.Registry.Get(m.id); err == nil && e.CgroupID == cgroupID {
				return m
			}
		}
		if try == 20 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}
