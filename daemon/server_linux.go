//go:build linux

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/metrics"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

var errNotServing = errors.New("the daemon builds its layers when it starts serving")

// Options configure a Server.
type Options struct {
	// Socket is the API socket path; "" means DefaultSocket.
	Socket string
	// AdminGroup (name or gid) may see and stop every session and answer
	// every approval; "" means root only.
	AdminGroup string
	// ManagedDir is the managed policy directory; "" means
	// policy.DefaultManagedDir. Clients never choose it.
	ManagedDir string
	// AuditPath is where the daemon and its sessions write audit records;
	// "" means audit.DefaultPath. Clients other than root cannot change it.
	AuditPath string
	// ApprovalTimeout is how long a request waits for an answer before it
	// is refused; 0 means 5 minutes.
	ApprovalTimeout time.Duration
	Cgroup          cgroup.Config
	Registry        session.Registry
	// SelfExe is the launcher binary; "" means /proc/self/exe.
	SelfExe string
	// Unavailable marks layers unavailable (the daemon's own
	// OXSUPERVISE_FORCE_UNAVAILABLE; never a client's).
	Unavailable map[string]bool
	// Log receives one line per notable event; nil means stderr.
	Log io.Writer
	// StateDir is DefaultStateDir unless set (tests).
	StateDir string
	// PinDir is DefaultPinDir unless set.
	PinDir string
	// KernelBuffer is the size in bytes of the ring buffer the BPF
	// programs report refusals in (a power of two); 0 means
	// policy.DefaultKernelBuffer.
	KernelBuffer int
	// Enforcers are pinned enforcement layers (see Enforcer).
	Enforcers []Enforcer
	// ResolverUpstream is the DNS upstream (host:port) of the network
	// layer's resolvers; empty means /etc/resolv.conf.
	ResolverUpstream []string

	// MaxConns bounds the connections open at once from users other than
	// root (0: DefaultMaxConns); MaxConnsPerUID bounds those of one uid
	// (0: DefaultMaxConnsPerUID). Connections beyond them are answered
	// 503 (code busy) and closed. Root is never refused.
	MaxConns, MaxConnsPerUID int

	// otlpRetry bounds the OTLP exporter's retries of a batch (tests; 0:
	// auditexport's default).
	otlpRetry time.Duration
	// adoptGrace overrides defaultAdoptGrace (tests; negative: none).
	adoptGrace time.Duration
	// headerTimeout and bodyTimeout override DefaultHeaderTimeout and
	// DefaultBodyTimeout (tests).
	headerTimeout, bodyTimeout time.Duration
}

// Connection limits (see Options.MaxConns). A run request holds its
// connection for as long as its session lives, so the bounds are well
// above the sessions one user runs.
const (
	DefaultMaxConns       = 512
	DefaultMaxConnsPerUID = 64
	// DefaultHeaderTimeout bounds reading a request's headers, and
	// DefaultBodyTimeout reading its body (at most MaxRequestBytes): a
	// client that stops sending mid-request is disconnected.
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 30 * time.Second
	// idleTimeout closes kept-alive connections that send no request.
	idleTimeout = 2 * time.Minute
)

// Server is the daemon.
type Server struct {
	opts     Options
	adminGID int // -1: none
	// zl writes the daemon's log as JSON lines; log is the same stream
	// for plain messages.
	zl   zerolog.Logger
	log  *log.Logger
	sink *audit.FileSink
	// metrics is nil unless the managed policy turns them on (metrics_linux.go).
	metrics *metrics.Metrics
	// enf are the session layers built once in Serve.
	enf *enforcement
	// work counts run requests and attach-session watchers that may still
	// use enf; stopping ends the watchers.
	work     sync.WaitGroup
	stopping chan struct{}

	mu       sync.Mutex
	sessions map[string]*managed
	pending  map[string]*pendingApproval
	calls    map[string]*callTrack
	// owners are the uids of sessions this daemon started or attached,
	// kept after they end for GET /audit.
	owners map[string]int
}

// managed is a session the daemon created or attached, with what it needs
// to answer for it later (its user and compiled policy).
type managed struct {
	id string
	// cgroupID is what the session's DNS queries are known by (0 when
	// not known: adopted sessions; see sessionByCgroup).
	cgroupID  uint64
	cred      credential
	home      string
	userName  string
	policy    *policy.Compiled
	workspace string
}

// New checks opts and returns a Server; nothing is listened on yet.
func New(opts Options) (*Server, error) {
	if opts.Socket == "" {
		opts.Socket = DefaultSocket
	}
	if opts.AuditPath == "" {
		opts.AuditPath = audit.DefaultPath
	}
	if opts.ApprovalTimeout <= 0 {
		opts.ApprovalTimeout = 5 * time.Minute
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.MaxConnsPerUID <= 0 {
		opts.MaxConnsPerUID = DefaultMaxConnsPerUID
	}
	if opts.headerTimeout <= 0 {
		opts.headerTimeout = DefaultHeaderTimeout
	}
	if opts.bodyTimeout <= 0 {
		opts.bodyTimeout = DefaultBodyTimeout
	}
	zl := zerolog.New(opts.Log).With().Timestamp().Str("component", "oxsupervise-daemon").Logger()
	s := &Server{
		opts: opts, adminGID: -1,
		zl: zl, log: log.New(zl.With().Str("level", "info").Logger(), "", 0),
		stopping: make(chan struct{}),
		// Replaced by the layers Serve builds; until then nothing is.
		enf: &enforcement{attached: map[uint64][]teardown{},
			netErr: errNotServing, fsErr: errNotServing},
		sessions: map[string]*managed{},
		pending:  map[string]*pendingApproval{},
		calls:    map[string]*callTrack{},
		owners:   map[string]int{},
	}
	if g := opts.AdminGroup; g != "" {
		grp, err := user.LookupGroup(g)
		if err != nil {
			grp, err = user.LookupGroupId(g)
		}
		if err != nil {
			return nil, fmt.Errorf("--admin-group %q: no such group", g)
		}
		s.adminGID, _ = strconv.Atoi(grp.Gid)
	}
	return s, nil
}

// Serve listens on the socket and serves until ctx is done. It adopts the
// sessions a previous daemon left behind first.
func (s *Server) Serve(ctx context.Context) error {
	started := time.Now()
	ln, err := s.listen()
	if err != nil {
		return err
	}
	sink, err := audit.OpenFileSink(s.opts.AuditPath, audit.SinkOptions{})
	if err != nil {
		ln.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	s.sink = sink
	defer sink.Close()
	stopObservability, err := s.startObservability(ctx, started) // metrics_linux.go
	if err != nil {
		ln.Close()
		return err
	}
	defer stopObservability()
	// The layers' own warnings (audit records that could not be written,
	// lost kernel events) are log lines at warn level.
	s.enf = buildEnforcement(s.opts, s.zl, s.zl.With().Str("level", "warn").Logger())
	if s.enf.net != nil {
		// Lookups of names no rule allows, in sessions that say
		// unknown_hosts = "ask", become pending approvals.
		s.enf.net.SetAsk(s.askHostname)
	}
	defer s.closeEnforcement()
	for _, line := range s.adopt(ctx) {
		s.log.Print(line)
	}
	srv := &http.Server{
		Handler:     s.Handler(),
		ConnContext: withConn,
		// No ReadTimeout or WriteTimeout: a run request streams for as
		// long as its session lives. The body has its own deadline (guard).
		ReadHeaderTimeout: s.opts.headerTimeout,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       idleTimeout,
		ErrorLog:          s.log,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() {
		errc <- srv.Serve(fdListener{UnixListener: ln, limits: newConnLimiter(s.opts.MaxConns, s.opts.MaxConnsPerUID)})
	}()
	s.log.Printf("listening on %s", s.opts.Socket)
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", s.opts.Socket, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	srv.Close()
	os.Remove(s.opts.Socket)
	return nil
}

// closeEnforcement waits for the run sessions (stopped when their
// connections closed) to be torn down, then detaches the layers.
func (s *Server) closeEnforcement() {
	close(s.stopping)
	done := make(chan struct{})
	go func() { s.work.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.zl.Error().Msg("sessions still being torn down after 15s; detaching the layers anyway")
	}
	if err := s.enf.close(s.zl); err != nil {
		s.zl.Error().Err(err).Msg("close enforcement layers")
	}
}

// listen creates the socket: its directory is root-owned 0755, the socket
// 0666, because authorization is per request by peer credentials.
func (s *Server) listen() (*net.UnixListener, error) {
	path := s.opts.Socket
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("socket directory %s must be a directory owned by uid %d and not group/world-writable", dir, os.Geteuid())
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; refusing to replace it", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another daemon is already listening", path)
		}
		os.Remove(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return ln, nil
}

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
	return s.instrument(s.guard(mux)) // metrics_linux.go
}

// guard makes every request safe to serve: a panic becomes a 500 for that
// request only, a body is bounded, and descriptors a request did not
// consume are closed when it ends.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if c := connOf(r.Context()); c != nil {
				c.closeFDs()
			}
		}()
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Printf("panic serving %s %s: %v", r.Method, r.URL.Path, v)
				writeError(w, errorf(http.StatusInternalServerError, "internal", "internal error (logged by the daemon)"))
			}
		}()
		r.Body = s.boundBody(w, r)
		next.ServeHTTP(w, r)
	})
}

// boundBody limits r's body to MaxRequestBytes and to the body timeout:
// the connection's read deadline covers the body and is lifted once the
// body has been read (a deadline left in place would end a streaming
// request's context when it fires).
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) io.ReadCloser {
	body := http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	if r.Body == http.NoBody || r.ContentLength == 0 {
		return body
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.opts.bodyTimeout)) != nil {
		return body
	}
	return &deadlineBody{ReadCloser: body, lift: func() { rc.SetReadDeadline(time.Time{}) }}
}

// deadlineBody lifts the read deadline when the body ends.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	b.once.Do(b.lift)
	return b.ReadCloser.Close()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = errorf(http.StatusInternalServerError, "internal", "%v", err)
	}
	writeJSON(w, e.Status, e)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "pid": os.Getpid()})
}

// requestPeer returns the request's kernel-reported peer.
func requestPeer(r *http.Request) (*Peer, error) {
	c := connOf(r.Context())
	if c == nil {
		return nil, errorf(http.StatusInternalServerError, "internal", "no peer credentials for this connection")
	}
	return &c.peer, nil
}

func (s *Server) isAdmin(p *Peer) bool {
	if p.UID == 0 {
		return true
	}
	if s.adminGID < 0 {
		return false
	}
	if p.GID == s.adminGID {
		return true
	}
	groups, err := p.groups()
	if err != nil {
		return false
	}
	for _, g := range groups {
		if g == s.adminGID {
			return true
		}
	}
	return false
}

// sessionOf returns the session the peer process is in ("" for none),
// confirmed against its pidfd so that a reused pid cannot answer for it.
func (s *Server) sessionOf(p *Peer) (string, error) {
	id, ok, err := cgroup.SessionOf(s.opts.Cgroup, p.PID)
	if err != nil {
		return "", errorf(http.StatusForbidden, "forbidden", "cannot tell which session pid %d is in: %v", p.PID, err)
	}
	if !p.alive() {
		return "", errorf(http.StatusForbidden, "forbidden", "peer pid %d exited during the request", p.PID)
	}
	if !ok {
		return "", nil
	}
	return id, nil
}

// outsideSession refuses requests from inside a session for endpoints that
// would let a confined process act beyond its boundary.
// outsidePeer authorizes a request that must come from outside every
// session (what names the action for the refusal) and decodes its body
// into req. It returns nil after writing the error response.
func (s *Server) outsidePeer(w http.ResponseWriter, r *http.Request, what string, req request) *Peer {
	p, err := requestPeer(r)
	if err == nil {
		err = s.outsideSession(p, what)
	}
	if err == nil {
		err = DecodeRequest(r.Body, req)
	}
	if err != nil {
		writeError(w, err)
		return nil
	}
	return p
}

func (s *Server) outsideSession(p *Peer, what string) error {
	id, err := s.sessionOf(p)
	if err != nil {
		return err
	}
	if id != "" {
		return errorf(http.StatusForbidden, "forbidden", "%s is not allowed from inside a session (caller pid %d is in session %s)", what, p.PID, id)
	}
	return nil
}

// userOf looks up the peer's account: home and name come from the user
// database, the groups from the kernel's view of the peer process.
func userOf(p *Peer) (credential, *user.User, error) {
	u, err := user.LookupId(strconv.Itoa(p.UID))
	if err != nil {
		return credential{}, nil, errorf(http.StatusForbidden, "forbidden", "uid %d has no entry in the user database: %v", p.UID, err)
	}
	groups, err := p.groups()
	if err != nil {
		return credential{}, nil, errorf(http.StatusForbidden, "forbidden", "%v", err)
	}
	return credential{UID: p.UID, GID: p.GID, Groups: groups}, u, nil
}

func toPolicyFlags(f PolicyFlags) *policy.Flags {
	return &policy.Flags{
		Sandbox: f.Sandbox, FullAuto: f.FullAuto, Yolo: f.Yolo, Workspace: f.Workspace,
		WritableRoots: f.WritableRoots, Net: f.Net, AllowNet: f.AllowNet, ConfigFile: f.ConfigFile,
	}
}

// loadPolicy compiles the policy of a session of cred: policy.Load runs
// with the user's file access (asUser), the managed directory is the
// daemon's, and the audit path is the daemon's unless the user is root.
// The directories the session will use must be accessible to the user.
func (s *Server) loadPolicy(cred credential, home string, flags PolicyFlags, dir string, env []string, warn io.Writer) (*policy.Compiled, error) {
	var c *policy.Compiled
	err := asUser(cred, func() error {
		for _, d := range []string{dir, flags.Workspace} {
			if d == "" {
				continue
			}
			fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return errorf(http.StatusForbidden, "forbidden", "directory %s: not accessible to uid %d: %v", d, cred.UID, err)
			}
			unix.Close(fd)
		}
		var err error
		c, _, err = policy.Load(policy.LoadOptions{
			ManagedDir: s.opts.ManagedDir,
			Home:       home,
			Workspace:  dir,
			Flags:      toPolicyFlags(flags),
			Env:        envLookup(env),
			Warn:       warn,
		})
		if err != nil {
			return errorf(http.StatusBadRequest, "policy", "policy: %v", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cred.UID != 0 && c.Audit.Path != s.opts.AuditPath {
		if c.Audit.Path != "" && c.Audit.Path != audit.DefaultPath {
			fmt.Fprintf(warn, "oxsupervise: warning: audit path %s ignored: the daemon writes audit records to %s\n", c.Audit.Path, s.opts.AuditPath)
		}
		c.Audit.Path = s.opts.AuditPath
	}
	return c, nil
}

func envLookup(env []string) func(string) string {
	return func(name string) string {
		v := ""
		for _, kv := range env {
			if k, val, ok := strings.Cut(kv, "="); ok && k == name {
				v = val
			}
		}
		return v
	}
}

// userEnv is env with the identity variables of u, and without a session
// marker the client may have inherited.
func userEnv(env []string, u *user.User) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "USER", "LOGNAME", session.SessionEnv:
			continue
		}
		out = append(out, kv)
	}
	return append(out, "HOME="+u.HomeDir, "USER="+u.Username, "LOGNAME="+u.Username)
}

// takeStdio takes exactly the three descriptors a run or exec request must
// carry.
func takeStdio(r *http.Request, what string) ([3]*os.File, error) {
	var files [3]*os.File
	c := connOf(r.Context())
	if c == nil {
		return files, errorf(http.StatusBadRequest, "bad_request", "%s needs a Unix socket connection", what)
	}
	fds := c.takeFDs()
	if len(fds) != 3 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return files, errorf(http.StatusBadRequest, "bad_request", "%s needs exactly 3 file descriptors (stdin, stdout, stderr) sent as SCM_RIGHTS with the request; got %d", what, len(fds))
	}
	for i, name := range []string{"stdin", "stdout", "stderr"} {
		files[i] = os.NewFile(uintptr(fds[i]), name)
	}
	return files, nil
}

// eventStream writes newline-delimited JSON events, flushed one by one.
type eventStream struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newEventStream(w http.ResponseWriter) *eventStream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	es := &eventStream{w: w, rc: http.NewResponseController(w)}
	es.rc.Flush()
	return es
}

func (es *eventStream) send(e Event) {
	es.mu.Lock()
	defer es.mu.Unlock()
	b, _ := json.Marshal(e)
	es.w.Write(append(b, '\n'))
	es.rc.Flush()
}

// warnWriter turns each line written into a warning event.
type warnWriter struct {
	es  *eventStream
	buf bytes.Buffer
}

func (ww *warnWriter) Write(b []byte) (int, error) {
	ww.buf.Write(b)
	for {
		line, err := ww.buf.ReadString('\n')
		if err != nil {
			ww.buf.WriteString(line)
			break
		}
		ww.es.send(Event{Event: "warning", Message: strings.TrimRight(line, "\n")})
	}
	return len(b), nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	p := s.outsidePeer(w, r, "creating a session", &req)
	if p == nil {
		return
	}
	stdio, err := takeStdio(r, "POST /sessions")
	if err != nil {
		writeError(w, err)
		return
	}
	defer func() {
		for _, f := range stdio {
			f.Close()
		}
	}()
	cred, u, err := userOf(p)
	if err != nil {
		writeError(w, err)
		return
	}
	var warnings bytes.Buffer
	c, err := s.loadPolicy(cred, u.HomeDir, req.Policy, req.Dir, req.Env, &warnings)
	if err != nil {
		writeError(w, err)
		return
	}
	s.work.Add(1)
	defer s.work.Done()
	layers, lw := s.enf.forSession("run", c)
	for _, l := range lw {
		fmt.Fprintf(&warnings, "oxsupervise run: warning: %s\n", l)
	}
	es := newEventStream(w)
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
	// A run session lives as long as its client: when the client goes
	// away, the session is stopped.
	go func() {
		select {
		case <-finished:
		case <-r.Context().Done():
			mu.Lock()
			sid := id
			mu.Unlock()
			if sid != "" {
				s.log.Printf("session %s: client disconnected; stopping it", sid)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				session.Stop(ctx, s.opts.Cgroup, s.opts.Registry, sid)
				cancel()
			}
		}
	}()
	code, err := session.Run(r.Context(), session.RunOptions{
		Policy: c, Argv: req.Argv, Env: userEnv(req.Env, u), Dir: req.Dir,
		UID: cred.UID, GID: cred.GID, Groups: cred.Groups,
		Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2],
		Warn: ww, Unavailable: s.opts.Unavailable, SelfExe: s.opts.SelfExe,
		Cgroup: s.opts.Cgroup, Registry: s.opts.Registry,
		Layers: s.layers(layers...), OnStart: onStart,
	})
	close(finished)
	mu.Lock()
	sid := id
	mu.Unlock()
	s.forget(sid)
	var be *session.BoundaryError
	var ee *session.ExecError
	switch {
	case errors.As(err, &be):
		s.metrics.RefusedStart(be.Layer)
		es.send(Event{Event: "error", Session: sid, Code: 125, Layer: be.Layer, Message: fmt.Sprintf("boundary not built: %v; nothing ran", be)})
	case errors.As(err, &ee):
		es.send(Event{Event: "error", Session: sid, Code: ee.Code, Message: ee.Error()})
	case err != nil:
		es.send(Event{Event: "error", Session: sid, Code: 1, Message: err.Error()})
	default:
		es.send(Event{Event: "exit", Session: sid, Code: code})
	}
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	p, err := requestPeer(r)
	if err != nil {
		writeError(w, err)
		return
	}
	list, lerr := session.List(s.opts.Cgroup, s.opts.Registry)
	if list == nil && lerr != nil {
		writeError(w, errorf(http.StatusInternalServerError, "internal", "list sessions: %v", lerr))
		return
	}
	admin := s.isAdmin(p)
	out := []session.Status{}
	for _, st := range list {
		// Groups nobody recorded have no owner: admins only.
		if admin || (st.Kind != "" && st.UID == p.UID) {
			out = append(out, st)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// ownedSession returns the registry entry of id if p may act on it.
func (s *Server) ownedSession(p *Peer, id string) (session.Entry, error) {
	if err := cgroup.ValidateSessionID(id); err != nil {
		return session.Entry{}, errorf(http.StatusBadRequest, "bad_request", "%v", err)
	}
	e, rerr := s.opts.Registry.Get(id)
	_, gerr := cgroup.OpenSession(s.opts.Cgroup, id)
	if rerr != nil && gerr != nil {
		return e, errorf(http.StatusNotFound, "not_found", "no such session %q", id)
	}
	if s.isAdmin(p) {
		return e, nil
	}
	if rerr != nil || e.UID != p.UID {
		// Same answer as for a missing session would leak nothing more,
		// but a clear refusal is more useful to the user.
		return e, errorf(http.StatusForbidden, "forbidden", "session %s does not belong to uid %d", id, p.UID)
	}
	mine, err := s.sessionOf(p)
	if err != nil {
		return e, err
	}
	if mine != "" && mine != id {
		return e, errorf(http.StatusForbidden, "forbidden", "a process in session %s cannot act on session %s", mine, id)
	}
	return e, nil
}

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

// procOwner reads the real and effective uid and gid of pid.
func procOwner(pid int) (ruid, euid, gid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	ruid, euid, gid = -1, -1, -1
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				ruid, _ = strconv.Atoi(f[0])
				euid, _ = strconv.Atoi(f[1])
			}
		}
		if rest, ok := strings.CutPrefix(line, "Gid:"); ok {
			if f := strings.Fields(rest); len(f) >= 1 {
				gid, _ = strconv.Atoi(f[0])
			}
		}
	}
	if ruid < 0 || euid < 0 || gid < 0 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/status: no Uid/Gid lines", pid)
	}
	return ruid, euid, gid, nil
}

func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	var req AttachRequest
	p := s.outsidePeer(w, r, "attaching a process", &req)
	if p == nil {
		return
	}
	pidfd, err := unix.PidfdOpen(req.PID, 0)
	if err != nil {
		writeError(w, errorf(http.StatusNotFound, "not_found", "pid %d: no such process", req.PID))
		return
	}
	defer unix.Close(pidfd)
	ruid, euid, gid, err := procOwner(req.PID)
	if err != nil {
		writeError(w, errorf(http.StatusNotFound, "not_found", "pid %d: %v", req.PID, err))
		return
	}
	// The owner was read through the pid number: it belongs to the process
	// the pidfd pins only if that process is still alive now (a pid is not
	// reused while its process exists). session.Attach checks the owner
	// again when it moves the tree.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		writeError(w, errorf(http.StatusNotFound, "not_found", "pid %d exited while being checked", req.PID))
		return
	}
	if (ruid != p.UID || euid != p.UID) && p.UID != 0 {
		writeError(w, errorf(http.StatusForbidden, "forbidden", "pid %d belongs to uid %d (real %d), not to the caller (uid %d): only its owner or root may attach it", req.PID, euid, ruid, p.UID))
		return
	}
	cred, u, err := userOf(p)
	if err != nil {
		writeError(w, err)
		return
	}
	if p.UID == 0 && euid != 0 {
		// Root confines someone else's process: the session, and any
		// approved command run for it, belong to that process's user.
		if tu, err := user.LookupId(strconv.Itoa(euid)); err == nil {
			u = tu
		}
		cred = credential{UID: euid, GID: gid}
	}
	var warn bytes.Buffer
	c, err := s.loadPolicy(cred, u.HomeDir, req.Policy, req.Dir, nil, &warn)
	if err != nil {
		writeError(w, err)
		return
	}
	layers, lw := s.enf.forAttach(c)
	for _, l := range lw {
		fmt.Fprintf(&warn, "oxsupervise attach: warning: %s\n", l)
	}
	e, err := session.Attach(r.Context(), session.AttachOptions{
		PID: req.PID, Policy: c, CallerUID: p.UID, AllowOtherUser: p.UID == 0,
		Warn: &warn, Unavailable: s.opts.Unavailable, Cgroup: s.opts.Cgroup, Registry: s.opts.Registry,
		Layers: s.layers(layers...),
	})
	if err != nil {
		var be *session.BoundaryError
		if errors.As(err, &be) {
			s.metrics.RefusedStart(be.Layer)
			writeError(w, errorf(http.StatusInternalServerError, "boundary", "boundary not built: %v; nothing was moved", be))
			return
		}
		writeError(w, errorf(http.StatusConflict, "conflict", "attach pid %d: %v", req.PID, err))
		return
	}
	if e.UID != cred.UID {
		e.UID = cred.UID
		s.opts.Registry.Put(*e)
	}
	s.noteOwner(e.ID, cred.UID)
	s.remember(&managed{id: e.ID, cgroupID: e.CgroupID, cred: cred, home: u.HomeDir, userName: u.Username, policy: c, workspace: c.Workspace.Path})
	s.log.Printf("session %s: uid %d attached pid %d", e.ID, p.UID, req.PID)
	s.work.Add(1)
	go s.watchAttached(e.ID, e.CgroupID)
	var warnings []string
	for _, l := range strings.Split(strings.TrimSpace(warn.String()), "\n") {
		if l != "" {
			warnings = append(warnings, l)
		}
	}
	writeJSON(w, http.StatusCreated, map[string]any{"session": e, "warnings": warnings})
}
