//go:build linux

package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/kernelaudit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// Nested sessions of a standalone run (docs/agents-tiers.md). Inside a
// session nothing can create a cgroup, write a BPF map or open an audit
// log, so `run` inside a session is a client of the supervisor of the
// session it runs in. A standalone `run` is that supervisor for as long as
// its session lives: RunNesting listens on a socket of its own, names it
// in the session's environment (NestEnv) and serves the requests of
// processes of that session, and of the sessions nested in it, on it.
//
// Who asks is never taken from the request: the caller's pid comes from
// SO_PEERCRED, is pinned by a pidfd, and its cgroup (the kernel's word)
// must lie in the session this run supervises. The session it asks for a
// child of is the innermost session of its cgroup (a command of a nested
// session nests below that one), and the child's policy is
// policy.Tighten(that session's, the request): a widening is refused with
// the joined *policy.WidenError words and nothing is created.

// NestEnv names the socket of the supervisor that serves the session, in
// the session's environment. It is a hint where to ask, not a credential:
// the supervisor authorizes by the caller's cgroup.
const NestEnv = "OXSUPERVISE_SUPERVISOR"

// DefaultNestDir holds the sockets of standalone runs: 0711 and beside
// /run/oxsupervise (0700), so a session running as another user than
// root reaches its socket.
const DefaultNestDir = "/run/oxsupervise-nest"

// NestRequest is what a nested `run` asks for.
type NestRequest struct {
	Argv []string `json:"argv"`
	Dir  string   `json:"dir"`
	// Env is the nested run's environment (the parent session's): the
	// supervisor scrubs it by the child's policy, the one scrub.
	Env []string `json:"env"`
	// PolicyArgs are the policy flags the nested run was given; none
	// means the parent's policy as it is (made tighter by Tier).
	PolicyArgs []string `json:"policy_args,omitempty"`
	// Tier "command" applies the command tier of Agent (the parent's
	// agent profile when empty).
	Tier  string `json:"tier,omitempty"`
	Agent string `json:"agent,omitempty"`
	// Launcher is the pid of the launcher the nested run started for the
	// command (a child of the nested run, in its group, waiting for its
	// spec): the supervisor moves it into the child's group while it
	// sets itself up (session.StartNestedLauncher).
	Launcher int `json:"launcher"`
	// ExecGate says the nested run holds the launcher at its exec gate
	// until the second answer admits it (NestAnswer.Admitted): the spec
	// is answered first, while the launcher is being moved.
	ExecGate bool `json:"exec_gate"`
}

// NestAnswer is the supervisor's answer to a NestRequest: first the
// child's gated Spec (or Error), then, once its launcher is verified in
// the child's group and session_start written, Admitted (or Error); at
// the end of the child its Records.
type NestAnswer struct {
	Session string `json:"session,omitempty"`
	Parent  string `json:"parent,omitempty"`
	// Spec is the launch spec in the launcher's wire encoding
	// (launcher.EncodeSpec), for the nested run to send on to its
	// launcher: the nested run is a fresh process, and its first JSON
	// decoding of the spec's types took ~1 ms on the way to the exec.
	// A run of another build finds no spec it reads and runs nothing.
	Spec []byte `json:"launch_spec,omitempty"`
	// Admitted opens the launcher's exec gate: nothing else does.
	Admitted bool `json:"admitted,omitempty"`
	// Warnings are the tier's and the compile's, for the caller's stderr.
	Warnings []string `json:"warnings,omitempty"`
	// Error is why nothing was created, Code the exit status to report.
	Error string `json:"error,omitempty"`
	Code  int    `json:"code,omitempty"`
	// Records are the child's refusals, in the final answer.
	Records []audit.Record `json:"records,omitempty"`
}

// NestReport is what the nested run reports once it was answered: the
// command's exit status (answered with the refusals).
type NestReport struct {
	Exit *int `json:"exit,omitempty"`
}

// NestOptions configure the nested sessions RunNesting serves.
type NestOptions struct {
	// Dir holds the socket; "" means DefaultNestDir.
	Dir string
	// Request compiles what req asks for, given the policy of the session
	// the caller runs in (the CLI's policy layers, as the session's user):
	// Tighten is applied to its result, here.
	Request func(parent *policy.Compiled, req NestRequest) (*policy.Compiled, []string, error)
	// UID is the sessions' user, for the records.
	UID int
	// Ahead, when set, is the socket ListenNestAhead listens on (in
	// Dir): RunNesting serves on it and closes it. Nil: RunNesting
	// listens itself.
	Ahead *NestListener
}

// RunNesting is Run for a session whose commands may run nested sessions
// inside it: the supervisor serves them for the session's lifetime.
func (h *Host) RunNesting(ctx context.Context, opts session.RunOptions, nest NestOptions) (int, error) {
	plan, err := h.Plan(planner.Run, opts.Policy, planner.ProbeIn(opts.Cgroup, opts.Unavailable), planner.Options{})
	if err != nil {
		return 0, err
	}
	if opts.KernelAudit == nil && plan.KernelAudit {
		// One kernel audit reader for the session and every nested
		// session it serves, opened while the session is built; closed
		// after the nest server (deferred below, so it runs first).
		hub := kernelaudit.StartHub(kernelaudit.Options{Cgroup: opts.Cgroup})
		if !opts.ExitAfter {
			defer hub.Close()
		}
		// A process that exits once Run returns leaves the reader to
		// its exit: by then every subscription has drained (Run and
		// each nested session waited for their marker), so the reader
		// hands nothing to anyone any more, and without RestoreOnClose
		// its Close only stops its goroutine and closes its socket,
		// which the exit closes as well. Close would write a marker of
		// its own into the audit stream and wait for kauditd to
		// deliver it back (the one way to wake a blocked netlink
		// receive), then ask the audit subsystem for its status: a
		// round trip through another thread and ~12 system calls.
		opts.KernelAudit = hub
	}
	var sock *nestSocket
	if nest.Ahead != nil {
		if sock, err = nest.Ahead.take(); err != nil {
			return 0, &session.BoundaryError{Layer: session.LayerCgroup, Err: fmt.Errorf("nested-session socket: %w", err)}
		}
	}
	srv, err := listenNest(h, plan, opts, nest, sock)
	if err != nil {
		return 0, &session.BoundaryError{Layer: session.LayerCgroup, Err: fmt.Errorf("nested-session socket: %w", err)}
	}
	defer srv.close()
	opts.SessionEnv = append(opts.SessionEnv, NestEnv+"="+srv.path)
	// The socket is the session's way out to its supervisor: allowed by
	// the supervisor's own rule, never by the user's files.
	opts.Policy.Network.AllowUnixSockets = append(opts.Policy.Network.AllowUnixSockets, srv.path)
	onStart := opts.OnStart
	opts.OnStart = func(info session.SessionInfo) {
		// The nested runs' first coding is done from here, where the
		// supervisor mostly waits (for the launcher at its gate, for the
		// exec, for the command) and the launcher uses one core, and
		// long before a nested run inside the command (a fresh process
		// whose start takes milliseconds) can connect. Started with the
		// host, it took CPU the session's start needed: both cores are
		// busy until the launcher runs.
		go warmNestCoding()
		srv.start(info)
		if onStart != nil {
			onStart(info)
		}
	}
	// The session's end killed the nested sessions' processes too (their
	// groups lie below its own): whoever is told it ended is told once
	// they have settled as well.
	settled := opts.Settled
	opts.Settled = func(code int, err error) {
		srv.settleChildren()
		if settled != nil {
			settled(code, err)
		}
	}
	opts.Plan = plan
	opts.Layers = append(h.Layers(plan), opts.Layers...)
	return session.Run(ctx, opts)
}

// nestServer serves the nested sessions of one session.
type nestServer struct {
	h    *Host
	plan *planner.Plan
	opts NestOptions
	cfg  cgroup.Config
	warn io.Writer
	// timing: each request's phases go to warn (the session's own
	// RunOptions.Timing is set: OXSUPERVISE_DEBUG_TIMING).
	timing bool
	path   string
	ln     *net.UnixListener
	wg     sync.WaitGroup

	// kaudit is the kernel audit reader the served session shares with
	// its nested sessions (RunOptions.KernelAudit).
	kaudit *kernelaudit.Hub

	mu       sync.Mutex
	conns    map[*net.UnixConn]bool
	root     string
	sessions map[string]session.SessionInfo // the served session and its live children
	children map[string]*nestChild
}

type nestChild struct {
	settled, released sync.Once
	n                 *session.Nested
	recs              []audit.Record
}

// settle settles the child once (the end its nested run reported, or the
// parent's end, whichever comes first) and returns its refusals.
func (c *nestChild) settle(code int, err error) []audit.Record {
	c.settled.Do(func() { c.recs = c.n.Settle(code, err) })
	return c.recs
}

// finish settles the child unless that was done, and releases it.
func (c *nestChild) finish(code int, err error) {
	c.settle(code, err)
	c.released.Do(c.n.Release)
}

// listenNest makes the server of opts' nested sessions on sock, or on a
// socket listened on now when sock is nil.
func listenNest(h *Host, plan *planner.Plan, opts session.RunOptions, nest NestOptions, sock *nestSocket) (*nestServer, error) {
	if sock == nil {
		var err error
		if sock, err = listenNestSocket(nest.Dir); err != nil {
			return nil, err
		}
	}
	warn := opts.Warn
	if warn == nil {
		warn = io.Discard
	}
	cfg := opts.Cgroup
	if cfg.Mount == "" {
		// Found once, not on every request: a nested group is made
		// below the session's, in this mount.
		m, err := cgroup.Cgroup2Mount()
		if err != nil {
			sock.ln.Close()
			return nil, err
		}
		cfg.Mount = m
	}
	return &nestServer{h: h, plan: plan, kaudit: opts.KernelAudit, opts: nest, cfg: cfg, warn: warn, timing: opts.Timing != nil,
		path: sock.path, ln: sock.ln,
		sessions: map[string]session.SessionInfo{}, children: map[string]*nestChild{}, conns: map[*net.UnixConn]bool{}}, nil
}

// start serves the session info, which now exists.
func (s *nestServer) start(info session.SessionInfo) {
	s.mu.Lock()
	s.root = info.ID
	s.sessions[info.ID] = info
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := s.ln.AcceptUnix()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[conn] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() {
					s.mu.Lock()
					delete(s.conns, conn)
					s.mu.Unlock()
					conn.Close()
				}()
				s.serve(conn)
			}()
		}
	}()
}

// warmNestCoding decodes a request and encodes an answer shaped like
// the nested runs', while the session's command starts: a standalone
// supervisor is a fresh process, and the first coding of these types
// (encoding/json's per-type caches, its code paged in) otherwise falls
// on the first nested run's path, between its request and its answer.
// The launch spec in the answer is the launcher's wire encoding, which
// needs no warming.
func warmNestCoding() {
	b, err := json.Marshal(NestRequest{Argv: []string{"a"}, Dir: "/", Env: []string{"a=b"}, PolicyArgs: []string{"a"}, Tier: "t", Agent: "a", Launcher: 1})
	if err == nil {
		var req NestRequest
		_ = json.Unmarshal(b, &req)
	}
	_ = json.NewEncoder(io.Discard).Encode(NestAnswer{Session: "s", Parent: "p", Spec: []byte{1}, Warnings: []string{"w"}})
}

// served are the nested sessions being served now.
func (s *nestServer) served() []*nestChild {
	s.mu.Lock()
	defer s.mu.Unlock()
	children := make([]*nestChild, 0, len(s.children))
	for _, c := range s.children {
		children = append(children, c)
	}
	return children
}

// errParentEnded is how a nested session ends that its nested run did not
// report the end of.
var errParentEnded = errors.New("the parent session ended")

// settleChildren settles every child still served (the session's end
// killed their processes already: they are below its group).
func (s *nestServer) settleChildren() {
	for _, c := range s.served() {
		c.settle(-1, errParentEnded)
	}
}

// close stops serving and ends every child still served.
func (s *nestServer) close() {
	s.ln.Close()
	for _, c := range s.served() {
		c.finish(-1, errParentEnded)
	}
	// A nested run still connected has lost its session: its end is
	// its answer.
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// NestSocket is the supervisor socket named in env, "" without one.
func NestSocket(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, NestEnv+"="); ok {
			return v
		}
	}
	return ""
}
