package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/openoxide/oxsupervise/session"
)

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = "/run/oxsupervise/api.sock"

// SocketEnv overrides DefaultSocket for every client verb and for the
// daemon itself (tests, and sessions whose daemon listens elsewhere).
const SocketEnv = "OXSUPERVISE_SOCKET"

// EnvSocket is $OXSUPERVISE_SOCKET, or DefaultSocket when it is unset.
func EnvSocket() string {
	if s := os.Getenv(SocketEnv); s != "" {
		return s
	}
	return DefaultSocket
}

// MaxRequestBytes bounds every request body. A run request carries the
// client's environment, which is rarely above a few KiB.
const MaxRequestBytes = 1 << 20

// Limits on request contents, so that a client cannot make the daemon hold
// or pass on unbounded data.
const (
	maxArgs     = 4096
	maxEnv      = 4096
	maxStrBytes = 128 << 10
	maxListLen  = 256
)

// Error is the body of every non-2xx response, and what the client returns
// for one.
type Error struct {
	// Status is the HTTP status (not sent; taken from the response).
	Status int `json:"-"`
	// Code is a stable machine-readable name: bad_request, too_large,
	// unknown_field, forbidden, not_found, conflict, policy, boundary,
	// unsupported, busy (connection limit), internal.
	Code    string `json:"code"`
	Message string `json:"error"`
}

func (e *Error) Error() string { return e.Message }

func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// PolicyFlags are the policy flags of `run` and `attach` (policy.Flags
// without --audit-log: the daemon decides where audit records go). Every
// non-zero field counts as given on the command line.
type PolicyFlags struct {
	Sandbox       string   `json:"sandbox,omitempty"`
	FullAuto      bool     `json:"full_auto,omitempty"`
	Yolo          bool     `json:"yolo,omitempty"`
	Workspace     string   `json:"workspace,omitempty"`
	WritableRoots []string `json:"writable_roots,omitempty"`
	Net           string   `json:"net,omitempty"`
	AllowNet      []string `json:"allow_net,omitempty"`
	ConfigFile    string   `json:"config_file,omitempty"`
	// Agent is --agent: an agent profile name, or "none".
	Agent string `json:"agent,omitempty"`
}

// RunRequest is the body of POST /sessions. The request must carry exactly
// three file descriptors (stdin, stdout, stderr, in that order) as
// SCM_RIGHTS on its bytes.
type RunRequest struct {
	Argv []string `json:"argv"`
	// Env is the client's environment; the daemon gives it the user's
	// identity (session.UserEnv: HOME, USER and LOGNAME the user's, no
	// MAIL, no inherited session marker) and the session scrubs it per
	// policy.
	Env []string `json:"env,omitempty"`
	// Dir is the command's working directory (absolute).
	Dir    string      `json:"dir"`
	Policy PolicyFlags `json:"policy"`
	// Timing asks for the daemon's phases of this run as timing events
	// (the client's OXSUPERVISE_DEBUG_TIMING; internal/phasetime).
	Timing bool `json:"timing,omitempty"`
}

// AttachRequest is the body of POST /sessions/attach.
type AttachRequest struct {
	PID    int         `json:"pid"`
	Policy PolicyFlags `json:"policy"`
	// Dir is the client's directory: the default workspace.
	Dir string `json:"dir"`
	// NetworkOnly accepts the network rules and cgroup containment alone
	// where no BPF-LSM can enforce the policy's filesystem rules (attach
	// --network-only); without it such an attach is refused.
	NetworkOnly bool `json:"network_only,omitempty"`
}

// AttachResult is the answer to POST /sessions/attach (201): the session's
// registry entry and the warnings of building its boundary.
type AttachResult struct {
	Session  session.Entry `json:"session"`
	Warnings []string      `json:"warnings"`
}

// SignalRequest is the body of POST /sessions/{id}/signal: a signal the
// client forwards to its session's command (the command does not share the
// client's terminal process group, so Ctrl-C reaches the client only).
type SignalRequest struct {
	Signal int `json:"signal"`
}

// ExecRequest is the body of POST /exec, sent from inside a session; like
// RunRequest it carries the caller's stdio as three SCM_RIGHTS fds.
type ExecRequest struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir"`
}

// ReplyRequest is the body of POST /permission/{id}/reply.
type ReplyRequest struct {
	Reply string `json:"reply"` // once | always | reject
}

// Replies to an approval request.
const (
	ReplyOnce   = "once"
	ReplyAlways = "always"
	ReplyReject = "reject"
)

// CheckRequest is the body of POST /permission/check (the semantics of
// `oxsupervise policy check`).
type CheckRequest struct {
	Tool  string `json:"tool"`
	Input string `json:"input"`
	Agent string `json:"agent,omitempty"`
	// Workspace selects the policy when the caller is not in a session the
	// daemon created (default: the caller's session policy).
	Workspace string `json:"workspace,omitempty"`
}

// CheckResponse is the answer to a permission check.
type CheckResponse struct {
	Action string `json:"action"` // allow | deny | ask
	Reason string `json:"reason,omitempty"`
	// Session is the session the call was tracked for ("" when none).
	Session string `json:"session,omitempty"`
	// Decision is the full policy decision (rule, per-command verdicts).
	Decision any `json:"decision,omitempty"`
}

// ReasonDoomLoop is the reason of an "ask" caused by the same tool call
// repeated DoomLoopThreshold times in a row.
const (
	ReasonDoomLoop    = "doom_loop"
	DoomLoopThreshold = 3
)

// Approval kinds.
const (
	KindExcludedCommand    = "excluded_command"
	KindUnsandboxedCommand = "unsandboxed_command"
	// KindHostname is a DNS lookup of a name no network.allow entry
	// matches, held by the session's resolver (unknown_hosts = "ask").
	KindHostname = "hostname"
)

// Approval is one pending request, as GET /permission lists it.
type Approval struct {
	ID      string   `json:"id"`
	Kind    string   `json:"kind"` // excluded_command | unsandboxed_command | hostname
	Session string   `json:"session"`
	UID     int      `json:"uid"`
	Command []string `json:"command"`
	// Host is the name a held DNS lookup asks for (kind hostname).
	Host    string    `json:"host,omitempty"`
	Dir     string    `json:"dir,omitempty"`
	Pattern string    `json:"pattern"` // what "always" would store
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Event is one line of the newline-delimited JSON stream that POST
// /sessions and POST /exec answer with.
type Event struct {
	// Event is started | warning | timing | pending | approved | rejected
	// | exit | error. A timing event's Message is one phase line of the
	// daemon's (RunRequest.Timing).
	Event   string `json:"event"`
	Session string `json:"session,omitempty"`
	PID     int    `json:"pid,omitempty"`
	// Approval is the id of a pending approval (event pending).
	Approval string `json:"approval,omitempty"`
	Message  string `json:"message,omitempty"`
	// Code is the exit status (event exit), or the status the client must
	// exit with (event error: 125 boundary not built, 126/127 exec failed,
	// 1 otherwise).
	Code  int    `json:"code"`
	Layer string `json:"layer,omitempty"`
}

// request is what every request body implements.
type request interface {
	validate() error
}

// DecodeRequest decodes one JSON request body into v strictly: at most
// MaxRequestBytes, no unknown fields, no trailing data, and v's own
// validation. Every failure is an *Error that names what was wrong.
func DecodeRequest(body io.Reader, v request) error {
	data, err := io.ReadAll(io.LimitReader(body, MaxRequestBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errorf(http.StatusRequestEntityTooLarge, "too_large", "request body is larger than %d bytes", MaxRequestBytes)
		}
		return errorf(http.StatusBadRequest, "bad_request", "read request body: %v", err)
	}
	if len(data) > MaxRequestBytes {
		return errorf(http.StatusRequestEntityTooLarge, "too_large", "request body is larger than %d bytes", MaxRequestBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return errorf(http.StatusBadRequest, "bad_request", "empty request body: expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return errorf(http.StatusBadRequest, "bad_request", "malformed JSON at byte %d: %v", se.Offset, err)
		case errors.As(err, &te):
			return errorf(http.StatusBadRequest, "bad_request", "field %q: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return errorf(http.StatusBadRequest, "unknown_field", "%s", strings.TrimPrefix(err.Error(), "json: "))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return errorf(http.StatusBadRequest, "bad_request", "malformed JSON: unexpected end of input")
		}
		return errorf(http.StatusBadRequest, "bad_request", "malformed JSON: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "bad_request", "trailing data after the JSON object at byte %d", dec.InputOffset())
	}
	if err := v.validate(); err != nil {
		return errorf(http.StatusBadRequest, "bad_request", "%v", err)
	}
	return nil
}

func checkStr(field, s string) error {
	if len(s) > maxStrBytes {
		return fmt.Errorf("%s: longer than %d bytes", field, maxStrBytes)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s: contains a NUL byte", field)
	}
	return nil
}

func checkAbs(field, p string, required bool) error {
	if p == "" {
		if required {
			return fmt.Errorf("%s: required", field)
		}
		return nil
	}
	if err := checkStr(field, p); err != nil {
		return err
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("%s: %q is not an absolute path", field, p)
	}
	return nil
}

// checkUserPath accepts an absolute path or one relative to the user's
// home (~/...), which the daemon expands with the home of the calling user;
// anything relative to a directory would be resolved against the daemon's.
func checkUserPath(field, p string) error {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return checkStr(field, p)
	}
	return checkAbs(field, p, false)
}

func checkList(field string, list []string, max int) error {
	if len(list) > max {
		return fmt.Errorf("%s: more than %d entries", field, max)
	}
	for i, s := range list {
		if err := checkStr(fmt.Sprintf("%s[%d]", field, i), s); err != nil {
			return err
		}
	}
	return nil
}

func checkArgv(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("argv: no command given")
	}
	return checkList("argv", argv, maxArgs)
}

func checkEnv(env []string) error {
	if err := checkList("env", env, maxEnv); err != nil {
		return err
	}
	for i, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("env[%d]: %q is not NAME=VALUE", i, kv)
		}
	}
	return nil
}

func (p PolicyFlags) validate() error {
	for field, s := range map[string]string{"policy.sandbox": p.Sandbox, "policy.net": p.Net} {
		if err := checkStr(field, s); err != nil {
			return err
		}
	}
	if err := checkUserPath("policy.workspace", p.Workspace); err != nil {
		return err
	}
	if err := checkUserPath("policy.config_file", p.ConfigFile); err != nil {
		return err
	}
	if err := checkList("policy.writable_roots", p.WritableRoots, maxListLen); err != nil {
		return err
	}
	for i, r := range p.WritableRoots {
		if err := checkUserPath(fmt.Sprintf("policy.writable_roots[%d]", i), r); err != nil {
			return err
		}
	}
	return checkList("policy.allow_net", p.AllowNet, maxListLen)
}

func (r *RunRequest) validate() error {
	if err := checkArgv(r.Argv); err != nil {
		return err
	}
	if err := checkEnv(r.Env); err != nil {
		return err
	}
	if err := checkAbs("dir", r.Dir, true); err != nil {
		return err
	}
	return r.Policy.validate()
}

func (r *AttachRequest) validate() error {
	if r.PID <= 0 {
		return fmt.Errorf("pid: %d is not a process id", r.PID)
	}
	if err := checkAbs("dir", r.Dir, true); err != nil {
		return err
	}
	return r.Policy.validate()
}

func (r *SignalRequest) validate() error {
	if !forwardable(r.Signal) {
		return fmt.Errorf("signal: %d is not one a client may forward (allowed: HUP INT QUIT TERM USR1 USR2 WINCH CONT TSTP)", r.Signal)
	}
	return nil
}

// forwardable reports whether sig is one a terminal or a supervisor would
// deliver to a command (Linux numbering): HUP INT QUIT USR1 USR2 TERM CONT
// TSTP WINCH.
func forwardable(sig int) bool {
	switch sig {
	case 1, 2, 3, 10, 12, 15, 18, 20, 28:
		return true
	}
	return false
}

func (r *ExecRequest) validate() error {
	if err := checkArgv(r.Argv); err != nil {
		return err
	}
	if err := checkEnv(r.Env); err != nil {
		return err
	}
	return checkAbs("dir", r.Dir, true)
}

func (r *ReplyRequest) validate() error {
	switch r.Reply {
	case ReplyOnce, ReplyAlways, ReplyReject:
		return nil
	}
	return fmt.Errorf("reply: %q is not one of once, always, reject", r.Reply)
}

func (r *CheckRequest) validate() error {
	if r.Tool == "" {
		return errors.New("tool: required")
	}
	for field, s := range map[string]string{"tool": r.Tool, "input": r.Input, "agent": r.Agent} {
		if err := checkStr(field, s); err != nil {
			return err
		}
	}
	return checkAbs("workspace", r.Workspace, false)
}

// AuditQuery is GET /audit's query, the filters of `audit tail`.
type AuditQuery struct {
	Follow  bool
	Session string
	PID     int
	Op      string
	Since   time.Time
}

// Values encodes q for the request URL.
func (q AuditQuery) Values() url.Values {
	v := url.Values{}
	if q.Follow {
		v.Set("follow", "1")
	}
	if q.Session != "" {
		v.Set("session", q.Session)
	}
	if q.PID != 0 {
		v.Set("pid", strconv.Itoa(q.PID))
	}
	if q.Op != "" {
		v.Set("op", q.Op)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	return v
}
