//go:build linux

package daemon

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, who *caller) {
	admin := who.admin()
	out := []Approval{}
	s.mu.Lock()
	for _, a := range s.pending {
		if admin || a.UID == who.UID {
			out = append(out, a.Approval)
		}
	}
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Approval) int { return a.Created.Compare(b.Created) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request, who *caller) {
	var req ReplyRequest
	if err := DecodeRequest(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	p := who.Peer
	id := r.PathValue("id")
	s.mu.Lock()
	a, ok := s.pending[id]
	if ok && a.UID != p.UID && !who.admin() {
		s.mu.Unlock()
		writeError(w, errorf(http.StatusForbidden, "forbidden", "approval %s is for uid %d, not for uid %d", id, a.UID, p.UID))
		return
	}
	if ok {
		delete(s.pending, id)
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, errorf(http.StatusNotFound, "not_found", "no pending approval %q (answered, expired or never existed)", id))
		return
	}
	a.answer <- req.Reply
	s.log.Printf("approval %s answered %s by uid %d", id, req.Reply, p.UID)
	writeJSON(w, http.StatusOK, map[string]string{"approval": id, "reply": req.Reply})
}

func (s *Server) auditApproval(sessionID string, m *managed, id, decision, command, reason string) {
	if s.sink == nil {
		return
	}
	r := &audit.Record{
		Timestamp: time.Now(),
		Message:   reason,
		User:      &audit.User{ID: strconv.Itoa(m.cred.UID), Name: m.userName},
		Event:     audit.Event{Reason: reason},
		Ox: audit.Ox{Kind: audit.KindApproval, Session: sessionID, Layer: audit.LayerSupervisor,
			Mode:     string(m.policy.Mode),
			Approval: &audit.Approval{ID: id, Decision: decision, Command: command}},
	}
	if err := s.sink.Write(r); err != nil {
		s.log.Printf("audit: %v", err)
	}
}
