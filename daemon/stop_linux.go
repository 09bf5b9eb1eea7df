//go:build linux

package daemon

import (
	"net/http"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/session"
)

// stopSession kills every process of a session and removes it (DELETE
// /sessions/{id}).
func (s *Server) stopSession(w http.ResponseWriter, r *http.Request, who *caller) {
	id := who.target
	if err := session.Stop(r.Context(), s.opts.Cgroup, s.opts.Registry, id); err != nil {
		writeError(w, errorf(http.StatusInternalServerError, "internal", "%v", err))
		return
	}
	s.forget(id)
	s.log.Printf("session %s stopped by uid %d", id, who.UID)
	writeJSON(w, http.StatusOK, map[string]string{"stopped": id})
}

// signalSession forwards a terminal signal to a session's command (POST
// /sessions/{id}/signal).
func (s *Server) signalSession(w http.ResponseWriter, r *http.Request, who *caller) {
	id, e := who.target, who.entry
	var req SignalRequest
	if err := DecodeRequest(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	if e.PID <= 0 {
		writeError(w, errorf(http.StatusConflict, "conflict", "session %s has no command process yet", id))
		return
	}
	// The pid is only signalled if it is still in the session: a pidfd
	// pins the process while its cgroup is checked.
	pidfd, err := unix.PidfdOpen(e.PID, 0)
	if err != nil {
		writeError(w, errorf(http.StatusConflict, "conflict", "session %s: command pid %d is gone", id, e.PID))
		return
	}
	defer unix.Close(pidfd)
	if in, ok, _ := cgroup.SessionOf(s.opts.Cgroup, e.PID); !ok || in != id {
		writeError(w, errorf(http.StatusConflict, "conflict", "session %s: pid %d is no longer in it", id, e.PID))
		return
	}
	if err := unix.PidfdSendSignal(pidfd, unix.Signal(req.Signal), nil, 0); err != nil {
		writeError(w, errorf(http.StatusConflict, "conflict", "signal pid %d: %v", e.PID, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"session": id, "pid": e.PID, "signal": req.Signal})
}
