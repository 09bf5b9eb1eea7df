//go:build linux

package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pelletier/go-toml/v2"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/egress"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// Approval kinds.
const (
	KindExcludedCommand    = "excluded_command"
	KindUnsandboxedCommand = "unsandboxed_command"
	// KindHostname is a DNS lookup of a name no network.allow entry
	// matches, held by the session's resolver (unknown_hosts = "ask").
	KindHostname = "hostname"
)

// ApprovalsFile is where "always" answers persist, relative to the
// workspace. It is below .openoxide/, a protected name, so the session it
// governs cannot write it.
const ApprovalsFile = ".openoxide/approvals.toml"

type pendingApproval struct {
	Approval
	answer chan string
}

// maxPendingPerSession bounds the requests one session can have waiting, so
// that an agent cannot flood its user's approval list or the daemon.
const maxPendingPerSession = 8

func (s *Server) pendingFor(sid string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.pending {
		if p.Session == sid {
			n++
		}
	}
	return n
}

// maxTrackedCallers bounds the doom-loop tracking table.
const maxTrackedCallers = 4096

// callTrack remembers a session's last tool call for doom-loop detection.
type callTrack struct {
	tool, input, agent string
	count              int
}

// approvalsDoc is the shape of approvals.toml.
type approvalsDoc struct {
	Approval []storedApproval `toml:"approval"`
}

type storedApproval struct {
	Kind       string    `toml:"kind"`
	Pattern    string    `toml:"pattern"`
	ApprovedBy int       `toml:"approved_by"`
	Time       time.Time `toml:"time"`
}

func newApprovalID() string {
	var b [6]byte
	rand.Read(b[:])
	return "a-" + hex.EncodeToString(b[:])
}

// shellJoin quotes argv as one POSIX shell command line, so that a stored
// pattern is matched by the same shell parser `policy check` uses.
func shellJoin(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			b.WriteString(a)
			continue
		}
		b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	return b.String()
}

// patternMatches reports whether a stored "always" pattern covers argv,
// with the permission matcher of `policy check`.
func patternMatches(pattern string, argv []string) bool {
	p := policy.Permissions{Default: policy.ActionAsk, Rules: []policy.PermissionRule{{Tool: "bash", Pattern: pattern, Action: policy.ActionAllow}}}
	return p.Check("bash", shellJoin(argv), "").Action == policy.ActionAllow
}

// readApprovals reads <workspace>/.openoxide/approvals.toml with the
// user's file access; a missing file is an empty list.
func readApprovals(cred credential, workspace string) ([]storedApproval, error) {
	var doc approvalsDoc
	err := asUser(cred, func() error {
		b, err := os.ReadFile(filepath.Join(workspace, ApprovalsFile))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := toml.NewDecoder(bytes.NewReader(b)).DisallowUnknownFields().Decode(&doc); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(workspace, ApprovalsFile), err)
		}
		return nil
	})
	return doc.Approval, err
}

// appendApproval adds one entry to the workspace's approvals.toml, as the
// user (so the daemon never writes where the user could not).
func appendApproval(cred credential, workspace string, a storedApproval) error {
	return asUser(cred, func() error {
		path := filepath.Join(workspace, ApprovalsFile)
		var doc approvalsDoc
		if b, err := os.ReadFile(path); err == nil {
			if err := toml.Unmarshal(b, &doc); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, x := range doc.Approval {
			if x.Kind == a.Kind && x.Pattern == a.Pattern {
				return nil
			}
		}
		doc.Approval = append(doc.Approval, a)
		b, err := toml.Marshal(doc)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		tmp := path + ".tmp"
		b = append([]byte("# Commands approved with `oxsupervise approve --always`; written by the oxsupervise daemon.\n"), b...)
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return err
		}
		return nil
	})
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

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	p, err := requestPeer(r)
	if err != nil {
		writeError(w, err)
		return
	}
	admin := s.isAdmin(p)
	out := []Approval{}
	s.mu.Lock()
	for _, a := range s.pending {
		if admin || a.UID == p.UID {
			out = append(out, a.Approval)
		}
	}
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Approval) int { return a.Created.Compare(b.Created) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request) {
	// The agent a request is about runs as the same user: an answer from
	// inside any session would let it approve itself.
	var req ReplyRequest
	p := s.outsidePeer(w, r, "answering an approval", &req)
	if p == nil {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	a, ok := s.pending[id]
	if ok && a.UID != p.UID && !s.isAdmin(p) {
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

// lookPathEnv finds file in the PATH of env.
func lookPathEnv(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	pathEnv := envLookup(env)("PATH")
	if pathEnv == "" {
		pathEnv = "/usr/local/bin:/usr/bin:/bin"
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found in PATH", file)
}

// exec runs an approved command outside the caller's session (DESIGN §2,
// escape hatch). The session is the one the caller's cgroup is in; its
// policy is the one the daemon compiled for it.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	p, err := requestPeer(r)
	if err != nil {
		writeError(w, err)
		return
	}
	sid, err := s.sessionOf(p)
	if err != nil {
		writeError(w, err)
		return
	}
	if sid == "" {
		writeError(w, errorf(http.StatusBadRequest, "bad_request", "exec --unsandboxed only works from inside a session (caller pid %d is in none); outside one, just run the command", p.PID))
		return
	}
	s.mu.Lock()
	m := s.sessions[sid]
	s.mu.Unlock()
	if m == nil {
		writeError(w, errorf(http.StatusConflict, "conflict", "session %s was not created by this daemon, so it has no policy here to judge the request", sid))
		return
	}
	var req ExecRequest
	if err := DecodeRequest(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	stdio, err := takeStdio(r, "POST /exec")
	if err != nil {
		writeError(w, err)
		return
	}
	defer func() {
		for _, f := range stdio {
			f.Close()
		}
	}()
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
		if n := s.pendingFor(sid); n >= maxPendingPerSession {
			reason := fmt.Sprintf("session %s already has %d requests waiting for an answer", sid, n)
			s.auditApproval(sid, m, id, "reject", command, reason)
			es.send(Event{Event: "rejected", Approval: id, Code: 1, Message: reason})
			return
		}
		pa := &pendingApproval{
			Approval: Approval{ID: id, Kind: kind, Session: sid, UID: m.cred.UID, Command: req.Argv, Dir: req.Dir,
				Pattern: pattern, Created: time.Now().UTC(), Expires: time.Now().UTC().Add(s.opts.ApprovalTimeout)},
			answer: make(chan string, 1),
		}
		s.mu.Lock()
		s.pending[id] = pa
		s.mu.Unlock()
		es.send(Event{Event: "pending", Session: sid, Approval: id,
			Message: fmt.Sprintf("waiting for approval: oxsupervise approve %s --once|--always|--reject", id)})
		timer := time.NewTimer(s.opts.ApprovalTimeout)
		select {
		case decision = <-pa.answer:
		case <-timer.C:
			decision = "timeout"
		case <-r.Context().Done():
			decision = "abandoned"
		}
		timer.Stop()
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
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
			if decision == "timeout" {
				reason = fmt.Sprintf("no answer within %s; refused", s.opts.ApprovalTimeout)
			} else if decision == "abandoned" {
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
func (s *Server) runOutside(ctx context.Context, m *managed, req *ExecRequest, stdio [3]*os.File) (int, error) {
	u := &user.User{HomeDir: m.home, Username: m.userName}
	env := userEnv(req.Env, u)
	path, err := lookPathEnv(req.Argv[0], env)
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

// check answers a permission check like `policy check`, tracking each
// session's calls: the same call DoomLoopThreshold times in a row is
// answered "ask" with reason doom_loop.
func (s *Server) check(w http.ResponseWriter, r *http.Request) {
	p, err := requestPeer(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var req CheckRequest
	if err := DecodeRequest(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	sid, err := s.sessionOf(p)
	if err != nil {
		writeError(w, err)
		return
	}
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
	if n := s.pendingFor(m.id); n >= maxPendingPerSession {
		reason := fmt.Sprintf("session %s already has %d requests waiting for an answer", m.id, n)
		s.auditApproval(m.id, m, id, "reject", q.Name, reason)
		return egress.AskReject, egress.ReasonAskBusy
	}
	now := time.Now().UTC()
	expires := now.Add(s.opts.ApprovalTimeout)
	if d, ok := ctx.Deadline(); ok {
		expires = d.UTC()
	}
	pa := &pendingApproval{
		Approval: Approval{ID: id, Kind: KindHostname, Session: m.id, UID: m.cred.UID, Command: []string{}, Host: q.Name,
			Pattern: q.Name, Created: now, Expires: expires},
		answer: make(chan string, 1),
	}
	s.mu.Lock()
	s.pending[id] = pa
	s.mu.Unlock()
	s.log.Printf("session %s: DNS lookup of %s waits for approval %s", m.id, q.Name, id)
	var decision string
	select {
	case decision = <-pa.answer:
	case <-ctx.Done():
		decision = "timeout"
	}
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
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
	case "timeout":
		s.auditApproval(m.id, m, id, "reject", q.Name, "no answer before the lookup's deadline; refused")
		return egress.AskReject, egress.ReasonAskTimeout
	}
	s.auditApproval(m.id, m, id, "reject", q.Name, "rejected")
	return egress.AskReject, egress.ReasonAskRejected
}
