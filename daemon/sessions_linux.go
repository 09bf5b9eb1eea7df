//go:build linux

package daemon

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/openoxide/oxsupervise/doctor"
	"github.com/openoxide/oxsupervise/host"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/session"
)

// createSession runs a command in a new session of the caller's
// (POST /sessions), streaming its events until it exits.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request, who *caller) {
	arrived := time.Now()
	var req RunRequest
	stdio, err := decodeWithStdio(r, &req)
	if err != nil {
		writeError(w, err)
		return
	}
	defer stdio.close() // closed already once the client was answered (report)
	var toClient *timingEvents
	if req.Timing {
		toClient = &timingEvents{}
	}
	tm := s.timing(arrived, toClient)
	cred, u, err := userOf(who.Peer)
	if err != nil {
		writeError(w, err)
		return
	}
	tm.Mark("request received")
	var warnings bytes.Buffer
	c, err := s.loadPolicy(cred, u.HomeDir, req.Policy, req.Dir, req.Env, req.Argv, &warnings)
	if err != nil {
		writeError(w, err)
		return
	}
	tm.Mark("policy")
	s.work.Add(1)
	defer s.work.Done()
	es := newEventStream(w)
	toClient.attach(es)
	ww := &warnWriter{es: es}
	ww.Write(warnings.Bytes())

	var mu sync.Mutex
	var id string
	finished := make(chan struct{})
	onStart := func(info session.SessionInfo) {
		mu.Lock()
		id = info.ID
		mu.Unlock()
		s.noteOwner(info.ID, cred.UID)
		s.remember(&managed{id: info.ID, cgroupID: info.CgroupID, cred: cred, home: u.HomeDir, userName: u.Username, policy: c, workspace: c.Workspace.Path})
		es.send(Event{Event: "started", Session: info.ID})
		s.log.Printf("session %s started for uid %d: %q", info.ID, cred.UID, req.Argv)
	}
	sessionID := func() string {
		mu.Lock()
		defer mu.Unlock()
		return id
	}
	// A run session lives as long as its client: when the client goes
	// away, the session is stopped.
	go func() {
		select {
		case <-finished:
		case <-r.Context().Done():
			if sid := sessionID(); sid != "" {
				s.log.Printf("session %s: client disconnected; stopping it", sid)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				session.Stop(ctx, s.opts.Cgroup, s.opts.Registry, sid)
				cancel()
			}
		}
	}()
	// The client hears how the session ended as soon as it has settled
	// (every record of it in the audit log, its group and registry entry
	// gone: RunOptions.Settled), or when Run fails before that; the
	// session is released afterwards, in the daemon, which forgets it once
	// Run has returned: session_stop is synced by then.
	var reportOnce sync.Once
	report := func(code int, err error) {
		reportOnce.Do(func() {
			close(finished)
			// Nothing of the session runs any more, and its launcher had
			// its own copies: the caller's streams are closed before the
			// client hears the end, so that a caller reading its
			// command's output to EOF is not kept waiting for the release.
			stdio.close()
			sid := sessionID()
			// Once the client has its answer: the next slot (slot_linux.go).
			defer s.slots.ended(sid)
			if err != nil {
				f := session.FailureOf(err)
				if f.Code == ExitNoBoundary {
					s.refusedStart(f.Layer) // observe_linux.go
					if rem := doctor.RefusalRemedy(err); rem != "" {
						f.Message += "\n" + strings.TrimRight(rem, "\n")
					}
				}
				es.send(Event{Event: "error", Session: sid, Code: f.Code, Layer: f.Layer, Message: f.Message})
				return
			}
			es.send(Event{Event: "exit", Session: sid, Code: code})
			tm.Mark("exit sent")
		})
	}
	// A command of the session may run nested sessions (nest_linux.go).
	code, err := s.enf.host.RunNesting(r.Context(), session.RunOptions{
		Policy: c, Argv: req.Argv, Env: session.UserEnv(req.Env, &session.EnvUser{Home: u.HomeDir, Name: u.Username}), Dir: req.Dir,
		UID: cred.UID, GID: cred.GID, Groups: cred.Groups,
		Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2],
		Warn: ww, Unavailable: s.opts.Unavailable, SelfExe: s.opts.SelfExe,
		Cgroup: s.opts.Cgroup, Registry: s.opts.Registry,
		OnStart: onStart, Settled: report, Timing: tm, Slots: s.slots, KernelAudit: s.kaudit,
	}, host.NestOptions{Dir: s.nestDir(), Request: s.nestRequest(cred, u.HomeDir), UID: cred.UID})
	report(code, err)
	s.forget(sessionID())
}

// timing is the phase recorder of a run request that arrived at arrived:
// each phase a debug record of the daemon's log when DebugTiming, and a
// timing event to the client when it asked (toClient); nil when neither.
func (s *Server) timing(arrived time.Time, toClient *timingEvents) *phasetime.Recorder {
	var to []io.Writer
	if s.opts.DebugTiming {
		to = append(to, debugLines{s.zl})
	}
	if toClient != nil {
		to = append(to, toClient)
	}
	if len(to) == 0 {
		return nil
	}
	return phasetime.NewSince(io.MultiWriter(to...), arrived)
}

// timingEvents sends the phase lines written to it to the client as timing
// events; those written before the event stream exists wait for it.
type timingEvents struct {
	mu      sync.Mutex
	es      *eventStream
	pending []string
}

func (t *timingEvents) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if t.es == nil {
			t.pending = append(t.pending, line)
			continue
		}
		t.es.send(Event{Event: "timing", Message: line})
	}
	return len(p), nil
}

// attach starts sending on es, the waiting lines first; nil t does nothing.
func (t *timingEvents) attach(es *eventStream) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.es = es
	for _, line := range t.pending {
		es.send(Event{Event: "timing", Message: line})
	}
	t.pending = nil
}

// debugLines writes each line it is given as a debug record.
type debugLines struct{ zl zerolog.Logger }

func (d debugLines) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		d.zl.Debug().Msg(line)
	}
	return len(p), nil
}

// listSessions lists the caller's sessions (GET /sessions); every session
// for admins.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, who *caller) {
	list, lerr := session.List(s.opts.Cgroup, s.opts.Registry)
	if list == nil && lerr != nil {
		writeError(w, errorf(http.StatusInternalServerError, "internal", "list sessions: %v", lerr))
		return
	}
	admin := who.admin()
	out := []session.Status{}
	for _, st := range list {
		// Groups nobody recorded have no owner: admins only.
		if admin || (st.Kind != "" && st.UID == who.UID) {
			out = append(out, st)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
