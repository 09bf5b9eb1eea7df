//go:build linux

package daemon

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

// listApprovals lists the pending requests the caller may answer (GET
// /permission): their own; every one for admins.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, who *caller) {
	admin := who.admin()
	writeJSON(w, http.StatusOK, s.pending.list(func(a *Approval) bool { return admin || a.UID == who.UID }))
}

// reply answers a pending request (POST /permission/{id}/reply), from
// outside every session (see routes).
func (s *Server) reply(w http.ResponseWriter, r *http.Request, who *caller) {
	var req ReplyRequest
	if err := DecodeRequest(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	err := s.pending.answer(id, req.Reply, func(a *Approval) error {
		if a.UID != who.UID && !who.admin() {
			return errorf(http.StatusForbidden, "forbidden", "approval %s is for uid %d, not for uid %d", id, a.UID, who.UID)
		}
		return nil
	})
	if errors.Is(err, errNoPending) {
		err = errorf(http.StatusNotFound, "not_found", "no pending approval %q (answered, expired or never existed)", id)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.log.Printf("approval %s answered %s by uid %d", id, req.Reply, who.UID)
	writeJSON(w, http.StatusOK, map[string]string{"approval": id, "reply": req.Reply})
}

// auditApproval writes one audit record of an approval request's course
// (pending, then the decision and the outcome).
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
