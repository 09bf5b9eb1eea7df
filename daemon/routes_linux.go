//go:build linux

package daemon

import (
	"net/http"
	"os"
)

// route is one endpoint of the API: its method and path, what it requires
// of its caller, and the handler that serves it once authorize has
// checked that.
type route struct {
	pattern string
	access  access
	handle  handlerFunc
}

// routes is the API (docs/daemon.md). Each resource's handlers live in
// the file named after it.
func (s *Server) routes() []route {
	return []route{
		{"GET /health", public, s.health},
		{"POST /sessions", outsideSessions("creating a session"), s.createSession},
		{"GET /sessions", anyPeer, s.listSessions},
		{"POST /sessions/attach", outsideSessions("attaching a process"), s.attach},
		{"DELETE /sessions/{id}", sessionOwner, s.stopSession},
		{"POST /sessions/{id}/signal", sessionOwner, s.signalSession},
		{"GET /permission", anyPeer, s.listApprovals},
		{"POST /permission/check", locatedPeer, s.check},
		// The agent a request is about runs as the same user: an answer
		// from inside any session would let it approve itself.
		{"POST /permission/{id}/reply", outsideSessions("answering an approval"), s.reply},
		{"POST /exec", inManagedSession("exec --unsandboxed"), s.exec},
		{"GET /audit", anyPeer, s.auditTail},
	}
}

// Handler is the API: guard, then the route's authorization, then its
// handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.Handle(rt.pattern, s.authorize(rt.access, rt.handle))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, "not_found", "no endpoint %s %s (see docs/daemon.md)", r.Method, r.URL.Path))
	})
	return s.instrument(s.guard(mux)) // observe_linux.go
}

func (s *Server) health(w http.ResponseWriter, r *http.Request, _ *caller) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "pid": os.Getpid()})
}
