//go:build linux

package session

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/kernelaudit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/policy"
)

// auditor writes a session's records to the audit log: session start and
// stop, and the Landlock and seccomp refusals the kernel audit feed
// attributes to it.
// Audit is observability, not a boundary: when the log or the kernel feed
// cannot be opened the session still runs, and the user is told loudly.
type auditor struct {
	id, mode string
	warn     io.Writer
	sink     *audit.FileSink
	reader   *kernelaudit.Reader
	// sub is the session's share of a supervisor's shared reader, instead
	// of a reader of its own (RunOptions.KernelAudit).
	sub         *kernelaudit.Subscription
	launcherPID atomic.Int64
	// auditSession is the session's kernel audit session id, 0 until known.
	auditSession atomic.Int64
	cancel       context.CancelFunc
	wg           sync.WaitGroup
	// settled is set once settle has run: the session's records are
	// complete in the log.
	settled bool
	// startNote is said once more in session_start's message (the agent
	// tier warning: sharedTierNote).
	startNote string

	// The kernel audit feed can deliver a refusal of the command before
	// the supervisor has written session_start (the command runs from the
	// moment it exec'd): such records wait in early until it is written,
	// so a session's log always opens with its start.
	mu      sync.Mutex
	started bool
	early   []audit.Record
}

// maxEarly bounds the records held back before session_start; past it
// they are written at once (order then yields to not losing them).
const maxEarly = 4096

// openAuditor opens the session's one audit sink, which the session's
// layers share (SessionInfo.Audit).
func openAuditor(cfgAudit policy.Audit, id, mode string, warn io.Writer) *auditor {
	a := &auditor{id: id, mode: mode, warn: warn}
	enrich := audit.NewEnricher(enrichTimeout)
	sink, err := openEnrichedAuditLog(cfgAudit, enrich)
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise: warning: NO AUDIT LOG for session %s: %v\n", id, err)
		return a
	}
	a.sink = sink
	// session_start names the command's ancestry, which is this
	// supervisor's: read it now, while the launcher starts, rather than
	// after the command has exec'd (~1 ms of /proc reads, issue 18).
	go enrich.Prefetch(os.Getpid())
	return a
}

// followKernelAudit writes the refusals the kernel audit feed attributes
// to the session (Landlock's and seccomp's: planner.Plan.KernelAudit),
// until close: those hub hands it when the supervisor shares one reader
// among its sessions, else those of a reader of its own.
func (a *auditor) followKernelAudit(cfg cgroup.Config, hub *kernelaudit.Hub) {
	if a.sink == nil {
		return
	}
	if hub != nil {
		a.followHub(hub)
		return
	}
	reader, err := a.openKernelAudit(cfg)
	a.followReader(reader, err)
}

// followHub subscribes the session to hub, the supervisor's shared
// reader: it is attributed the same processes as a reader of its own
// (openKernelAudit's launcher pid and audit session, the cgroup).
func (a *auditor) followHub(hub *kernelaudit.Hub) {
	if a.sink == nil {
		return
	}
	id, mode := a.id, a.mode
	sub, err := hub.Subscribe(id, kernelaudit.Attribution{
		PID: func(pid int) bool { return int64(pid) == a.launcherPID.Load() },
		AuditSession: func(ses uint32) bool {
			_, own := a.isOwnAuditSession(ses)
			return own
		},
	}, func(r audit.Record) {
		if r.Ox.Mode == "" {
			r.Ox.Mode = mode
		}
		a.write(r)
	})
	if err != nil {
		fmt.Fprintf(a.warn, "oxsupervise: warning: Landlock and seccomp refusals of session %s will not be audited: %v\n", id, err)
		return
	}
	a.sub = sub
}

// openKernelAudit opens the kernel audit feed for a's session. Its
// records are attributed through a (the launcher's pid, the session's
// audit session), so it may open before a has its sink: a nested
// session's opens while its policy is compiled (ReserveNested).
func (a *auditor) openKernelAudit(cfg cgroup.Config) (*kernelaudit.Reader, error) {
	return kernelaudit.Open(kernelaudit.Options{
		Cgroup: cfg,
		SessionOfPID: func(pid int) (string, bool) {
			return a.id, int64(pid) == a.launcherPID.Load()
		},
		SessionOfAuditSession: a.isOwnAuditSession,
	})
}

// followReader writes the refusals reader (openKernelAudit's, err its
// error) attributes to the session, until close.
func (a *auditor) followReader(reader *kernelaudit.Reader, err error) {
	if a.sink == nil {
		if reader != nil {
			reader.Close()
		}
		return
	}
	id, mode, warn := a.id, a.mode, a.warn
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise: warning: Landlock and seccomp refusals of session %s will not be audited: %v\n", id, err)
		return
	}
	a.reader = reader
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		reader.Run(ctx, func(r audit.Record) {
			// Every supervisor hears every session's records; each
			// writes only its own.
			if r.Ox.Session != id && r.Ox.Kind == audit.KindDenial {
				return
			}
			if r.Ox.Mode == "" {
				r.Ox.Mode = mode
			}
			a.write(r)
		})
	}()
}

func (a *auditor) setLauncherPID(pid int) { a.launcherPID.Store(int64(pid)) }

// isOwnAuditSession reports whether ses is the kernel audit session the
// launcher opened (newAuditSession) for this session: every process of the
// session carries it, exited or not. The launcher's id is read when the
// command has exec'd (sessionStart) or, if a record comes first, then
// (a record of the session cannot come before the launcher switched), and
// kept once it differs from the supervisor's own.
func (a *auditor) isOwnAuditSession(ses uint32) (string, bool) {
	own := a.auditSession.Load()
	if own == 0 {
		pid := a.launcherPID.Load()
		if pid == 0 {
			return "", false
		}
		launcher, err1 := readAuditSession(fmt.Sprintf("/proc/%d/sessionid", pid))
		self, err2 := readAuditSession("/proc/self/sessionid")
		if err1 != nil || err2 != nil || launcher == self {
			return "", false
		}
		own = int64(launcher)
		a.auditSession.Store(own)
	}
	return a.id, int64(ses) == own
}

func (a *auditor) write(r audit.Record) {
	if a.sink == nil {
		return
	}
	a.mu.Lock()
	if !a.started && len(a.early) < maxEarly {
		a.early = append(a.early, r)
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	a.writeNow(r)
}

// release writes the held-back records (after session_start, or at close
// when the session never started).
func (a *auditor) release() {
	a.mu.Lock()
	early := a.early
	a.early, a.started = nil, true
	a.mu.Unlock()
	for _, r := range early {
		a.writeNow(r)
	}
}

func (a *auditor) writeNow(r audit.Record) {
	if a.sink == nil {
		return
	}
	if err := a.sink.Write(&r); err != nil {
		fmt.Fprintf(a.warn, "oxsupervise: warning: audit record lost: %v\n", err)
	}
}

func (a *auditor) sessionStart(e *Entry) {
	// The command has exec'd: the launcher's audit session is final.
	a.isOwnAuditSession(0)
	defer a.release()
	msg := fmt.Sprintf("session %s started: %s", e.ID, strings.Join(e.Command, " "))
	if e.Launcher != "" {
		msg += "; launcher " + e.Launcher
	}
	if a.startNote != "" {
		msg += "; warning: " + a.startNote
	}
	a.writeNow(audit.Record{
		Message: msg,
		Process: &audit.Process{PID: e.PID, CommandLine: strings.Join(e.Command, " ")},
		User:    &audit.User{ID: fmt.Sprint(e.UID)},
		Ox: audit.Ox{Kind: audit.KindSessionStart, Session: e.ID, Layer: audit.LayerSupervisor,
			Mode: e.Mode, PolicyDigest: e.PolicyDigest, Rule: "layers: " + strings.Join(e.Layers, ",")},
	})
}

// stopRecord is the session_stop record of the session of e, which
// ended with code (or err).
func stopRecord(e *Entry, code int, err error) *audit.Record {
	msg := fmt.Sprintf("session %s ended: exit status %d", e.ID, code)
	if err != nil {
		msg = fmt.Sprintf("session %s ended: %v", e.ID, err)
	}
	return &audit.Record{
		Timestamp: time.Now(),
		Message:   msg,
		Process:   &audit.Process{PID: e.PID},
		User:      &audit.User{ID: fmt.Sprint(e.UID)},
		Ox: audit.Ox{Kind: audit.KindSessionStop, Session: e.ID, Layer: audit.LayerSupervisor,
			Mode: e.Mode, PolicyDigest: e.PolicyDigest},
	}
}

// endKernelAudit starts the kernel audit drain (Reader.Run's marker) once
// the session's processes are gone; settle waits for it to finish. The
// shared reader's marker is written from a goroutine of its own, as the
// reader's own is (Run): writing it is a request to the audit subsystem
// and its acknowledgement, which the rest of the session's end need not
// wait for (settle's Wait does, if it comes first).
func (a *auditor) endKernelAudit() {
	if a.cancel != nil {
		a.cancel()
	}
	if a.sub != nil {
		go a.sub.Drain()
	}
}

// settle completes the session's records. It is called once the
// session's processes are gone, so every refusal they made is already
// queued in the kernel: cancelling makes the reader drain the kernel
// backlog and its socket (a flood can leave thousands of records in
// flight) rather than stop, and any it cannot read in time is written as
// an events_lost record. Then stop (session_stop; nil when the session
// never started) is written, the session's last record, whose sync the
// sink starts at once: from then on the log holds every record of the
// session, durably once close has returned. The other writers (the
// layers, the name checks) are done before settle is called.
func (a *auditor) settle(stop *audit.Record) {
	if a.settled {
		return
	}
	a.settled = true
	if a.reader != nil {
		a.cancel()
		a.wg.Wait()
	}
	if a.sub != nil {
		a.sub.Wait()
	}
	a.release()
	if stop != nil {
		a.write(*stop)
	}
}

// close releases the kernel audit feed and the sink, settling first when
// settle was not called (a session that failed to start). It returns
// once session_stop is synced (the sink's Close waits for it), and warns
// when that failed.
func (a *auditor) close() {
	a.settle(nil)
	if a.reader != nil {
		a.reader.Close()
	}
	if a.sink != nil {
		if err := a.sink.Close(); err != nil {
			fmt.Fprintf(a.warn, "oxsupervise: warning: audit log: %v\n", err)
		}
	}
}
