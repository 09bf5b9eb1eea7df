//go:build linux

package daemon

import (
	"net/http"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/session"
)

func (s *Server) stopSession(w http.ResponseWriter, r *http.Request) {
	p, err := requestPeer(r)
	if err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	if _, err := s.ownedSession(p, id); err != nil {
		writeError(w, err)
		return
	}
	if err := session.Stop(r.Context(), s.opts.Cgroup, s.opts.Registry, id); err != nil {
		writeError(w, errorf(http.StatusInternalServerError, "internal", "%v", err))
		return
	}
	s.forget(id)
	s.log.Printf("session %s stopped by uid %d", id, p.UID)
	writeJSON(w, http.StatusOK, map[string]string{"stopped": id})
}

func (s *Server) signalSession(w http.ResponseWriter, r *http.Request) {
	p, err := requestPeer(r)
	if err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	var req SignalRequest
	if err := DecodeRequest(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	e, err := s.ownedSession(p, id)
	if err != nil {
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
