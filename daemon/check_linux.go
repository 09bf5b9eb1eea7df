//go:build linux

package daemon

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/openoxide/oxsupervise/policy"
)

// maxTrackedCallers bounds the doom-loop tracking table.
const maxTrackedCallers = 4096

// callTrack remembers a session's last tool call for doom-loop detection.
type callTrack struct {
	tool, input, agent string
	count              int
}

// check answers a permission check like `policy check`, tracking each
// session's calls: the same call DoomLoopThreshold times in a row is
// answered "ask" with reason doom_loop.
func (s *Server) check(w http.ResponseWriter, r *http.Request, who *caller) {
	var req CheckRequest
	if err := DecodeRequest(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	p, sid := who.Peer, who.session
	s.mu.Lock()
	m := s.sessions[sid]
	s.mu.Unlock()
	var c *policy.Compiled
	key := sid
	if m != nil {
		c = m.policy
	} else {
		if req.Workspace == "" {
			writeError(w, errorf(http.StatusBadRequest, "bad_request", "workspace: required when the caller is not in a session this daemon manages"))
			return
		}
		cred, u, err := userOf(p)
		if err != nil {
			writeError(w, err)
			return
		}
		c, err = s.loadPolicy(cred, u.HomeDir, PolicyFlags{Workspace: req.Workspace}, req.Workspace, nil, nil, &bytes.Buffer{})
		if err != nil {
			writeError(w, err)
			return
		}
		key = fmt.Sprintf("uid:%d:%s", p.UID, req.Workspace)
		if sid != "" {
			key = sid
		}
	}
	d := c.Permissions.Check(req.Tool, req.Input, req.Agent)
	resp := CheckResponse{Action: string(d.Action), Reason: d.Reason, Session: sid, Decision: d}
	s.mu.Lock()
	t := s.calls[key]
	if t == nil && len(s.calls) >= maxTrackedCallers {
		// Callers outside sessions are keyed by uid and workspace, which a
		// client chooses: bound the memory they can make the daemon hold.
		clear(s.calls)
	}
	if t == nil {
		t = &callTrack{}
		s.calls[key] = t
	}
	if t.tool == req.Tool && t.input == req.Input && t.agent == req.Agent {
		t.count++
	} else {
		*t = callTrack{tool: req.Tool, input: req.Input, agent: req.Agent, count: 1}
	}
	count := t.count
	s.mu.Unlock()
	if count >= DoomLoopThreshold && d.Action != policy.ActionDeny {
		resp.Action = string(policy.ActionAsk)
		resp.Reason = ReasonDoomLoop
	}
	writeJSON(w, http.StatusOK, resp)
}
