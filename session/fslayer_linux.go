//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/fsguard"
)

// FSConfig configures NewFSLayer.
type FSConfig struct {
	// Warn receives warnings (audit records that could not be written,
	// lost kernel events).
	Warn io.Writer
	// Flood tunes the per-session flood control in front of the audit
	// sink.
	Flood audit.FloodOptions
}

// FSLayer is the SessionLayer LayerBPFLSM: BPF-LSM filesystem and
// self-protection rules (package fsguard) keyed by the session's cgroup,
// and the audit record of every refusal they report, plus events_lost
// records when the kernel could not hand refusals over.
//
// Once a session is active its tasks can no longer mount, call bpf(2) or
// reach tasks outside. Run's launcher builds a private mount namespace
// inside the session cgroup, so run activates this layer only after the
// launcher reports its mounts done and before it execs (see
// activatesBeforeExec); attach activates it before moving any process in.
//
// The programs and the event reader live in this process: when it closes,
// enforcement ends.
type FSLayer struct {
	guard *fsguard.Guard
	warn  io.Writer
	flood audit.FloodOptions

	mu       sync.Mutex
	sessions map[uint64]*fsSession
	lost     uint64 // kernel lost-event count already reported
	closed   bool

	// handled counts records the read loop finished; busy is set while it
	// holds one it has not written yet. drain uses both, as the guard's
	// reader cannot be polled without blocking.
	handled  atomic.Uint64
	busy     atomic.Bool
	stop     chan struct{}
	loopDone chan struct{}
	lostDone chan struct{}
}

type fsSession struct {
	sessionAudit
	// rules is set when the guard holds rules for the session (a policy
	// without filesystem rules, full-access or external-sandbox, adds
	// none).
	rules bool
	// emu orders the event loop's writes against remove: once ended is
	// set no record of the session is written, so read is final.
	emu   sync.Mutex
	ended bool
	// read counts the session's events written as records.
	read uint64
	// suppressed is the programs' flood-control count already written
	// as suppressed records (fsguard.Event.Suppressed only grows).
	suppressed uint64
}

// fsLostPoll is how often the lost-event counter is read.
const fsLostPoll = time.Second

// fsDrainQuiet is how long the read loop must have been idle for drain to
// consider the ring buffer empty, and fsDrainMax bounds the wait.
const (
	fsDrainQuiet = 150 * time.Millisecond
	fsDrainMax   = 3 * time.Second
)

// NewFSLayer loads and attaches the filesystem programs. Call it only
// where BPF-LSM is usable (loader.ProbeBPFLSM); an error means it is not.
func NewFSLayer(cfg FSConfig) (*FSLayer, error) {
	g, err := fsguard.Load()
	if err != nil {
		return nil, err
	}
	// The kernel limits each session's events as FloodControl limits its
	// records, so the ring buffer is not filled by what would be
	// suppressed anyway.
	rate, burst := cfg.Flood.Rate, cfg.Flood.Burst
	if rate <= 0 {
		rate = fsguard.DefaultFloodRate
	}
	if burst <= 0 {
		burst = fsguard.DefaultFloodBurst
	}
	g.SetFlood(rate, burst)
	l := &FSLayer{
		guard: g, warn: warnOrDiscard(cfg.Warn), flood: cfg.Flood,
		sessions: map[uint64]*fsSession{},
		stop:     make(chan struct{}), loopDone: make(chan struct{}), lostDone: make(chan struct{}),
	}
	// Losses counted before this supervisor loaded the programs are not
	// its to report.
	if n, err := g.EventsLost(); err == nil {
		l.lost = n
	}
	go l.readLoop()
	go l.lostLoop()
	return l, nil
}

// Name implements SessionLayer.
func (l *FSLayer) Name() string { return LayerBPFLSM }

// Hooks names the LSM hooks the programs are attached to.
func (l *FSLayer) Hooks() []string { return l.guard.Hooks() }

// activatesBeforeExec marks the layer for run's exec gate: its rules
// refuse mounts, so it must not be active while the launcher builds the
// session's mount namespace.
func (l *FSLayer) activatesBeforeExec() {}

// Apply starts enforcing s.Policy's filesystem rules for s's cgroup and
// opens the session's audit sink (s.Policy.Audit.Path, default
// audit.DefaultPath). An audit log that cannot be opened is a warning:
// audit is observability, not the boundary.
func (l *FSLayer) Apply(ctx context.Context, s SessionInfo) (func(context.Context) error, error) {
	if s.Policy == nil {
		return nil, errors.New("no policy")
	}
	fs := &fsSession{sessionAudit: openSessionAudit(s, l.flood, l.warn, "filesystem"), rules: s.Policy.FilesystemRules}
	// Registered first: the first refusal may come before AddSession
	// returns.
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		fs.close(l.warn)
		return nil, errors.New("bpf-lsm layer already closed")
	}
	l.sessions[s.CgroupID] = fs
	l.mu.Unlock()
	if err := l.guard.AddSession(s.CgroupID, s.Policy); err != nil {
		l.mu.Lock()
		delete(l.sessions, s.CgroupID)
		l.mu.Unlock()
		fs.close(l.warn)
		return nil, err
	}
	return func(context.Context) error { return l.remove(s.CgroupID) }, nil
}

// remove ends one session once its group is empty: its queued refusals
// are written (the guard explains them only while the session exists),
// then its rules are dropped.
func (l *FSLayer) remove(cgroupID uint64) error {
	l.drain()
	l.mu.Lock()
	fs := l.sessions[cgroupID]
	l.mu.Unlock()
	if fs == nil {
		return nil
	}
	var err error
	if fs.rules {
		l.settle(fs, cgroupID)
		err = l.guard.RemoveSession(cgroupID)
	}
	l.mu.Lock()
	delete(l.sessions, cgroupID)
	l.mu.Unlock()
	fs.close(l.warn)
	return err
}

// Close removes every session still applied and detaches the programs.
// Tasks still in those sessions lose their filesystem confinement, so
// callers kill the sessions first.
func (l *FSLayer) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	ids := make([]uint64, 0, len(l.sessions))
	for id := range l.sessions {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, l.remove(id))
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.lostDone
	errs = append(errs, l.guard.Close())
	<-l.loopDone
	return errors.Join(errs...)
}

// drain waits until the read loop has written every refusal queued now.
// The programs queue an event before the refused syscall returns, so once
// a session's tasks are gone its events are all in the ring buffer and
// the loop reads them back to back; a loop idle for fsDrainQuiet has
// emptied it. The lost counter is checked last, so losses are reported
// before the session's sink closes.
func (l *FSLayer) drain() {
	deadline := time.Now().Add(fsDrainMax)
	last, quietSince := l.handled.Load(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(fsDrainQuiet / 5)
		n := l.handled.Load()
		if n != last || l.busy.Load() {
			last, quietSince = n, time.Now()
			continue
		}
		if time.Since(quietSince) >= fsDrainQuiet {
			break
		}
	}
	l.checkLost()
}

// readLoop turns refusals into audit records until the guard closes.
func (l *FSLayer) readLoop() {
	defer close(l.loopDone)
	for {
		ev, err := l.guard.ReadEvent()
		if errors.Is(err, fsguard.ErrClosed) {
			return
		}
		if err != nil {
			select {
			case <-l.stop:
				return
			default:
			}
			fmt.Fprintf(l.warn, "oxsupervise: warning: filesystem events: %v\n", err)
			time.Sleep(fsDrainQuiet / 5)
			continue
		}
		l.busy.Store(true)
		l.eventRefused(ev)
		l.handled.Add(1)
		l.busy.Store(false)
	}
}

// lostLoop reports lost events and flushes suppression summaries.
func (l *FSLayer) lostLoop() {
	defer close(l.lostDone)
	tick := time.NewTicker(fsLostPoll)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
			l.checkLost()
			l.flushAll()
		}
	}
}

func (l *FSLayer) checkLost() {
	n, err := l.guard.EventsLost()
	if err != nil {
		fmt.Fprintf(l.warn, "oxsupervise: warning: %v\n", err)
		return
	}
	l.mu.Lock()
	delta := n - l.lost
	l.lost = n
	var sinks []audit.Writer
	for _, fs := range l.sessions {
		if fs.sink != nil {
			sinks = append(sinks, fs.sink)
		}
	}
	l.mu.Unlock()
	if delta == 0 {
		return
	}
	// The kernel cannot say whose events it lost: every session's log
	// hears about it, and the terminal too.
	fmt.Fprintf(l.warn, "oxsupervise: warning: %d filesystem refusal events lost (ring buffer full)\n", delta)
	for _, w := range sinks {
		writeRecord(w, fsLostRecord(delta), l.warn)
	}
}

func fsLostRecord(n uint64) *audit.Record {
	return &audit.Record{
		Message: fmt.Sprintf("%d filesystem refusal events lost: the kernel ring buffer was full", n),
		Ox:      audit.Ox{Kind: audit.KindEventsLost, Layer: audit.LayerBPFLSM, EventsLost: n},
	}
}

func (l *FSLayer) flushAll() {
	l.mu.Lock()
	var ws []*audit.FloodControl
	for _, fs := range l.sessions {
		if fs.w != nil {
			ws = append(ws, fs.w)
		}
	}
	l.mu.Unlock()
	flushSuppressed(ws, l.warn)
}

func (l *FSLayer) eventRefused(ev fsguard.Event) {
	l.mu.Lock()
	fs := l.sessions[ev.CgroupID]
	l.mu.Unlock()
	if fs == nil {
		// The programs only judge sessions this layer added; one removed
		// meanwhile has nowhere to go but the terminal.
		fmt.Fprintf(l.warn, "oxsupervise: warning: filesystem refusal of an unknown session (cgroup %d): %s %s by pid %d\n", ev.CgroupID, ev.Op, ev.Path, ev.PID)
		return
	}
	fs.emu.Lock()
	defer fs.emu.Unlock()
	if fs.ended {
		// settle counted it as lost already.
		return
	}
	fs.read++
	if fs.w == nil {
		return
	}
	if delta := ev.Suppressed - min(ev.Suppressed, fs.suppressed); delta > 0 {
		fs.suppressed = ev.Suppressed
		writeRecord(fs.w, suppressedRecord(fs.id, delta), l.warn)
	}
	writeRecord(fs.w, fsRecord(ev, fs.id, fs.mode, time.Now()), l.warn)
}

// fsSettleMax bounds how long remove waits for a session's events still
// in the ring buffer; what is unread then is reported as lost.
const fsSettleMax = 30 * time.Second

// settle accounts for every refusal of an ended session: it waits until
// the event loop has written as many records as the programs sent, then
// stops the loop writing for it and reports what is still unread as
// events_lost and the final flood-control count as suppressed. Denial
// records plus those counts equal the session's refusals.
func (l *FSLayer) settle(fs *fsSession, cgroupID uint64) {
	counts, err := l.guard.Counts(cgroupID)
	if err != nil {
		fmt.Fprintf(l.warn, "oxsupervise: warning: %v\n", err)
	}
	deadline := time.Now().Add(fsSettleMax)
	for {
		fs.emu.Lock()
		read := fs.read
		if read >= counts.Sent || !time.Now().Before(deadline) {
			fs.ended = true
			fs.emu.Unlock()
			break
		}
		fs.emu.Unlock()
		time.Sleep(fsDrainQuiet / 5)
	}
	if err != nil {
		return
	}
	l.writeSuppressed(fs, counts.Suppressed)
	if unread := counts.Sent - min(counts.Sent, fs.read); unread > 0 && fs.w != nil {
		fmt.Fprintf(l.warn, "oxsupervise: warning: %d filesystem refusal events of session %s not read before it ended\n", unread, fs.id)
		r := fsLostRecord(unread)
		r.Ox.Session = fs.id
		writeRecord(fs.w, r, l.warn)
	}
}

// writeSuppressed writes a suppressed record for what the programs'
// flood control counted beyond what fs reported already (total is its
// running count).
func (l *FSLayer) writeSuppressed(fs *fsSession, total uint64) {
	fs.emu.Lock()
	delta := total - min(total, fs.suppressed)
	fs.suppressed = max(fs.suppressed, total)
	fs.emu.Unlock()
	if delta == 0 || fs.w == nil {
		return
	}
	writeRecord(fs.w, suppressedRecord(fs.id, delta), l.warn)
}

func suppressedRecord(session string, n uint64) *audit.Record {
	return &audit.Record{
		Message: fmt.Sprintf("%d filesystem refusals not logged one by one (kernel flood control)", n),
		Ox:      audit.Ox{Kind: audit.KindSuppressed, Session: session, Layer: audit.LayerBPFLSM, Suppressed: n},
	}
}

// fsActions maps fsguard's operations onto the schema's event.action
// vocabulary (the one Landlock records use too); the precise operation
// stays in event.reason.
var fsActions = map[fsguard.Op]string{
	fsguard.OpOpenWrite: "open", fsguard.OpOpenRead: "open",
	fsguard.OpLinkSource: "link", fsguard.OpLink: "link",
	fsguard.OpRenameSource: "rename", fsguard.OpRenameTarget: "rename",
}

// fsRecord builds the audit record of one refusal.
func fsRecord(ev fsguard.Event, session, mode string, now time.Time) *audit.Record {
	action, ok := fsActions[ev.Op]
	if !ok {
		action = ev.Op.String()
	}
	class := audit.ClassFile
	if ev.Kind == fsguard.KindSelf {
		class = audit.ClassSelfProtection
	}
	r := &audit.Record{
		Timestamp: now,
		Event:     audit.Event{Action: action, Reason: ev.Op.String() + ": " + ev.Kind.String()},
		Ox: audit.Ox{Kind: audit.KindDenial, Session: session, Layer: audit.LayerBPFLSM, Class: class,
			Errno: int(ev.Errno), Rule: ev.Rule, Mode: mode},
	}
	if ev.PID != 0 {
		r.Process = &audit.Process{PID: int(ev.PID), Name: ev.Comm, Thread: &audit.Thread{ID: int(ev.TID)}}
		r.User = &audit.User{ID: fmt.Sprint(ev.UID)}
	}
	switch {
	case class == audit.ClassSelfProtection && ev.TargetPID != 0:
		r.Message = fmt.Sprintf("%s of pid %d refused: %s", ev.Op, ev.TargetPID, ev.Rule)
	case class == audit.ClassSelfProtection:
		r.Message = fmt.Sprintf("%s refused: %s", ev.Op, ev.Rule)
	default:
		r.File = &audit.File{Path: ev.Path, Device: fmt.Sprintf("%d:%d", unix.Major(ev.Dev), unix.Minor(ev.Dev)), Inode: ev.Ino}
		r.Message = fmt.Sprintf("%s %s refused: %s", ev.Op, ev.Path, ev.Rule)
	}
	return r
}
