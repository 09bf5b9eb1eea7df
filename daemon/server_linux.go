//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/kernelaudit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/daemon/observe"
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
	// SelfExe is a binary that is its own launcher (session.RunOptions);
	// "" means the launcher package session decides (the installed one).
	SelfExe string
	// Unavailable marks layers unavailable (the daemon's own
	// OXSUPERVISE_FORCE_UNAVAILABLE; never a client's).
	Unavailable map[string]bool
	// Log receives one line per notable event; nil means stderr.
	Log io.Writer
	// DebugTiming logs, at debug level, how long each phase of every run
	// session's start and end takes (phasetime; the daemon's
	// OXSUPERVISE_DEBUG_TIMING).
	DebugTiming bool
	// StateDir is DefaultStateDir unless set (tests).
	StateDir string
	// PinDir is DefaultPinDir unless set.
	PinDir string
	// KernelBuffer is the size in bytes of the ring buffer the BPF
	// programs report refusals in (a power of two); 0 means
	// policy.DefaultKernelBuffer.
	KernelBuffer int
	// ResolverUpstream is the DNS upstream (host:port) of the network
	// layer's resolvers; empty means /etc/resolv.conf.
	ResolverUpstream []string

	// MaxConns bounds the connections open at once from users other than
	// root (0: DefaultMaxConns); MaxConnsPerUID bounds those of one uid
	// (0: DefaultMaxConnsPerUID). Connections beyond them are answered
	// 503 (code busy) and closed. Root is never refused.
	MaxConns, MaxConnsPerUID int

	// Exporters starts the exporters the managed policy turns on
	// (exporters.Start; the daemon program passes it). nil: none, and a
	// managed policy that turns one on fails the start.
	Exporters observe.Start

	// otlpRetry bounds the OTLP exporter's retries of a batch (tests; 0:
	// auditexport's default).
	otlpRetry time.Duration
	// adoptGrace overrides defaultAdoptGrace (tests; negative: none).
	adoptGrace time.Duration
	// roviewAfterFunc schedules the end of the read-only view audit's
	// linger instead of time.AfterFunc (tests end it themselves).
	roviewAfterFunc func(d time.Duration, f func()) (stop func() bool)
	// headerTimeout and bodyTimeout override DefaultHeaderTimeout and
	// DefaultBodyTimeout (tests).
	headerTimeout, bodyTimeout time.Duration
}

// Server is the daemon.
type Server struct {
	opts     Options
	adminGID int // -1: none
	// zl writes the daemon's log as JSON lines; log is the same stream
	// for plain messages.
	zl   zerolog.Logger
	log  *log.Logger
	sink *audit.FileSink
	// counters are nil unless the managed policy turns metrics on
	// (observe_linux.go).
	counters observe.Counters
	// parsed keeps the parse of the policy files every request reads
	// again (managed, the users', the workspaces'): each is still read
	// per request, as its user, and parsed again once its bytes change.
	parsed *policy.ParseCache
	// enf are the session layers built once in Serve.
	enf *enforcement
	// kaudit is the kernel audit reader every run session shares, opened
	// once in Serve; nil when it could not be opened (each session then
	// opens its own, and says so when that fails too).
	kaudit *kernelaudit.Hub
	// work counts run requests and attach-session watchers that may still
	// use enf; stopping ends the watchers.
	work     sync.WaitGroup
	stopping chan struct{}
	// slots keeps a session slot ready for the next run request
	// (slot_linux.go), from Serve on.
	slots *slotPool

	// pending are the approval requests waiting for an answer (it has
	// its own lock).
	pending *pendingStore

	mu       sync.Mutex
	sessions map[string]*managed
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
	// The cgroup2 mount is found once: every run request hands this
	// Config to the nest socket and to the next slot, each of which would
	// read /proc/self/mountinfo again (0.1 ms each, issue 18); with the
	// mount known they only check it is still cgroup2 (statfs). When it
	// cannot be found now, each use keeps failing as it would have.
	if cg, err := opts.Cgroup.Resolved(); err == nil {
		opts.Cgroup = cg
	}
	zl := zerolog.New(opts.Log).With().Timestamp().Str("component", "oxsupervise-daemon").Logger()
	s := &Server{
		opts: opts, adminGID: -1,
		zl: zl, log: log.New(zl.With().Str("level", "info").Logger(), "", 0),
		stopping: make(chan struct{}),
		parsed:   policy.NewParseCache(),
		// Replaced by the layers Serve builds; until then nothing is.
		enf: &enforcement{attached: map[uint64][]teardown{},
			netErr: errNotServing, fsErr: errNotServing},
		sessions: map[string]*managed{},
		pending:  newPendingStore(),
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
	stopObservability, err := s.startObservability(ctx, started) // observe_linux.go
	if err != nil {
		ln.Close()
		return err
	}
	defer stopObservability()
	// The layers' own warnings (audit records that could not be written,
	// lost kernel events) are log lines at warn level.
	s.enf = buildEnforcement(s.opts, s.zl, s.zl.With().Str("level", "warn").Logger(), s.resolverAnswered())
	if s.enf.net != nil {
		// Lookups of names no rule allows, in sessions that say
		// unknown_hosts = "ask", become pending approvals.
		s.enf.net.SetAsk(s.askHostname)
	}
	// Opened before the sessions can start and closed after they are
	// torn down (closeEnforcement, deferred later, runs first).
	if hub, err := kernelaudit.OpenHub(kernelaudit.Options{Cgroup: s.opts.Cgroup}); err != nil {
		s.zl.Warn().Err(err).Msg("no shared kernel audit reader: each session opens its own")
	} else {
		s.kaudit = hub
		defer func() {
			if err := hub.Close(); err != nil {
				s.zl.Error().Err(err).Msg("shared kernel audit reader")
			}
		}()
	}
	defer s.closeEnforcement()
	for _, line := range s.adopt(ctx) {
		s.log.Print(line)
	}
	// After adopt, which removes what a crashed daemon's slot left.
	s.slots = newSlotPool(session.SlotOptions{Cgroup: s.opts.Cgroup, Registry: s.opts.Registry, SelfExe: s.opts.SelfExe}, s.zl)
	defer s.slots.close()
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
