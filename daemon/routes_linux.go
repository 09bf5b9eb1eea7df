//go:build linux

package daemon

import (
	"net/http"
	"os"
)

// Handler is the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("POST /sessions", s.createSession)
	mux.HandleFunc("GET /sessions", s.listSessions)
	mux.HandleFunc("POST /sessions/attach", s.attach)
	mux.HandleFunc("DELETE /sessions/{id}", s.stopSession)
	mux.HandleFunc("POST /sessions/{id}/signal", s.signalSession)
	mux.HandleFunc("GET /permission", s.listApprovals)
	mux.HandleFunc("POST /permission/check", s.check)
	mux.HandleFunc("POST /permission/{id}/reply", s.reply)
	mux.HandleFunc("POST /exec", s.exec)
	mux.HandleFunc("GET /audit", s.auditTail)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, "not_found", "no endpoint %s %s (see docs/daemon.md)", r.Method, r.URL.Path))
	})
	return s.guard(mux)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "pid": os.Getpid()})
}
