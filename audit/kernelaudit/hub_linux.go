//go:build linux

package kernelaudit

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

// This file is the shared reader of a long-lived supervisor (the daemon,
// or a run with the nested sessions it serves): one socket and one assembler for every session it runs, each session
// subscribed with what identifies its processes, and each session's end
// drained exactly on the shared stream by a marker of its own.

// Hub reads the kernel audit feed once for many sessions and hands each
// refusal to the session it is attributed to (Reader's rules: a
// subscriber's pids, the pid's cgroup, a subscriber's audit session, the
// domain's creator). Records of loss (events_lost) go to every session
// subscribed when the loss was seen: a dropped record may have been any
// session's. Opening a reader costs a session 0.2-6 ms (issue 18); a Hub
// is opened once.
type Hub struct {
	r *Reader
	// opened is closed once Open returned: r is set, or openErr.
	opened  chan struct{}
	openErr error
	done    chan struct{}
	err     error
	// stopping is set by Close: the loop returns after its receive.
	stopping  atomic.Bool
	closeOnce sync.Once

	mu   sync.Mutex
	subs map[string]*Subscription
	// stopped is set when the reading loop ended: nothing is read for a
	// subscription any more.
	stopped bool
	// waiting are the subscriptions whose marker is in flight.
	waiting []*Subscription
	// quiet are the subscriptions whose marker could not be written: they
	// end on the quiet-socket evidence (Reader.drain's).
	quiet []*Subscription
}

// Attribution says which processes are a subscriber's beyond its cgroup:
// its launcher's pid (the launcher may have exited, or not yet entered
// the session's group) and its kernel audit session. Either may be nil.
type Attribution struct {
	PID          func(pid int) bool
	AuditSession func(ses uint32) bool
}

// Subscription is one session's share of a Hub.
type Subscription struct {
	h    *Hub
	id   string
	owns Attribution
	emit func(audit.Record)

	once    sync.Once
	mk      marker
	quietN  int
	drained chan struct{}
	// deadline is when a drain that has not seen its marker gives up.
	deadline time.Time
}

// StartHub opens a Reader (opts as for Open; SessionOfPID and
// SessionOfAuditSession are the Hub's) in the background and starts
// reading: a supervisor opens it while it builds the rest of a session
// (the open is a few round trips to the audit subsystem), and Subscribe
// waits for it.
func StartHub(opts Options) *Hub {
	h := &Hub{done: make(chan struct{}), opened: make(chan struct{}), subs: map[string]*Subscription{}}
	opts.SessionOfPID = h.sessionOfPID
	opts.SessionOfAuditSession = h.sessionOfAuditSession
	go func() {
		defer close(h.opened)
		r, err := Open(opts)
		if err != nil {
			h.openErr = err
			close(h.done)
			return
		}
		h.r = r
		go h.run()
	}()
	return h
}

// OpenHub is StartHub, waiting for the reader to open.
func OpenHub(opts Options) (*Hub, error) {
	h := StartHub(opts)
	<-h.opened
	if h.openErr != nil {
		return nil, h.openErr
	}
	return h, nil
}

// Subscribe adds the session id: from now on its refusals are handed to
// emit (from the Hub's goroutine, one record at a time) until its drain
// ends (Subscription.Wait). The error is why the reader could not open.
func (h *Hub) Subscribe(id string, owns Attribution, emit func(audit.Record)) (*Subscription, error) {
	<-h.opened
	if h.openErr != nil {
		return nil, h.openErr
	}
	s := &Subscription{h: h, id: id, owns: owns, emit: emit, drained: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		close(s.drained)
		return s, nil
	}
	h.subs[id] = s
	return s, nil
}

// Stats are the shared reader's counters (zero when it did not open).
func (h *Hub) Stats() Stats {
	<-h.opened
	if h.r == nil {
		return Stats{}
	}
	return h.r.Stats()
}

// Close stops the reader; subscriptions still waiting end at once. It
// returns the reader's error, if it failed.
func (h *Hub) Close() error {
	<-h.opened
	if h.r == nil {
		return nil
	}
	h.closeOnce.Do(func() {
		h.stopping.Store(true)
		// A receive waiting on the netlink socket wakes on a datagram,
		// else at its 50 ms deadline (the Reader, whose Close would end
		// it, is closed only once the loop is done): a message of the
		// Hub's own wakes it at once.
		_ = sendMarker([]byte(markerPrefix + strconv.Itoa(os.Getpid()) + "-stop"))
	})
	<-h.done
	err := h.r.Close()
	if h.err != nil {
		return h.err
	}
	return err
}

// Drain starts the end of the session: call it once the session's last
// process is gone, so every refusal it made is queued in the kernel ahead
// of the marker Drain writes. It does not wait (Wait does).
func (s *Subscription) Drain() {
	s.once.Do(func() {
		s.mk = newMarker()
		s.deadline = time.Now().Add(s.h.r.opts.DrainTimeout)
		h := s.h
		h.mu.Lock()
		if _, ok := h.subs[s.id]; !ok { // the reader stopped
			h.mu.Unlock()
			return
		}
		h.waiting = append(h.waiting, s)
		h.mu.Unlock()
		if err := sendMarker(s.mk.text); err != nil {
			h.mu.Lock()
			h.waiting = remove(h.waiting, s)
			h.quiet = append(h.quiet, s)
			h.mu.Unlock()
		}
	})
}

// Wait drains the session (Drain, if not called yet) and returns once
// every record queued before its marker was handed to emit, or counted
// in an events_lost record; emit is not called again.
func (s *Subscription) Wait() {
	s.Drain()
	<-s.drained
}

// run is the Hub's reading loop, until Close.
func (h *Hub) run() {
	defer close(h.done)
	var l *loop
	l = h.r.newLoop(h.r.opts.SessionOfAuditSession, h.dispatch, func(payload []byte) { h.markerArrived(l, payload) })
	defer func() {
		l.finish()
		h.mu.Lock()
		for id, s := range h.subs {
			delete(h.subs, id)
			close(s.drained)
		}
		h.waiting, h.quiet, h.stopped = nil, nil, true
		h.mu.Unlock()
	}()
	for {
		got, stop, err := l.receive()
		if stop {
			h.err = err
			return
		}
		if h.stopping.Load() {
			return
		}
		h.idle(l, got)
		h.expireDrains(l)
	}
}

// dispatch hands a record to its session; a loss record to every session,
// named as the session's.
func (h *Hub) dispatch(rec audit.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rec.Ox.Kind == audit.KindDenial {
		if s := h.subs[rec.Ox.Session]; s != nil {
			s.emit(rec)
		}
		return
	}
	// Each session's log says the loss may have been its own.
	for id, s := range h.subs {
		own := rec
		if own.Ox.Session == "" {
			own.Ox.Session = id
		}
		s.emit(own)
	}
}

// markerArrived ends the drain whose marker payload is: every record of
// the session was queued before it, so they have all been added; those of
// its events still waiting for more records (no EOE) are complete and are
// flushed now, then the session is unsubscribed.
func (h *Hub) markerArrived(l *loop, payload []byte) {
	h.mu.Lock()
	var s *Subscription
	for _, w := range h.waiting {
		if bytes.Contains(payload, w.mk.text) {
			s = w
			break
		}
	}
	h.mu.Unlock()
	if s == nil {
		return // another reader's marker
	}
	h.r.mu.Lock()
	h.r.stats.MarkerDrains++
	h.r.mu.Unlock()
	h.finishDrain(l, s)
}

// end unsubscribes s; its emit is never called after.
func (h *Hub) end(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[s.id] == s {
		delete(h.subs, s.id)
		close(s.drained)
	}
	h.waiting = remove(h.waiting, s)
	h.quiet = remove(h.quiet, s)
}

// idle runs after each receive: got says whether it brought anything. A
// drain whose marker could not be written ends after two receive
// timeouts in a row with the kernel backlog empty (Reader.drain's
// evidence); one whose marker was accepted but does not come back (an
// audit rule dropped it) gives up after markerGiveUp of them, as
// Reader.drainToMarker does.
func (h *Hub) idle(l *loop, got bool) {
	h.mu.Lock()
	if len(h.quiet) == 0 && len(h.waiting) == 0 {
		h.mu.Unlock()
		return
	}
	if got {
		for _, s := range h.waiting {
			s.quietN = 0
		}
		for _, s := range h.quiet {
			s.quietN = 0
		}
		h.mu.Unlock()
		return
	}
	type drain struct {
		s     *Subscription
		limit int
	}
	var drains []drain
	for _, s := range h.quiet {
		drains = append(drains, drain{s, 2})
	}
	for _, s := range h.waiting {
		drains = append(drains, drain{s, markerGiveUp})
	}
	h.mu.Unlock()
	st, err := getStatus()
	for _, d := range drains {
		if err == nil && st.Backlog > 0 {
			d.s.quietN = 0
			continue
		}
		if d.s.quietN++; d.s.quietN >= d.limit {
			h.finishDrain(l, d.s)
		}
	}
}

// finishDrain ends s's drain: its events still waiting for more records
// are complete (its processes are gone) and flushed, the losses seen up
// to now are reported (to every session, s among them), and s is
// unsubscribed.
func (h *Hub) finishDrain(l *loop, s *Subscription) {
	l.flush(l.asm.take(func(ev Event) bool { return l.asm.belongsTo(ev, l.r.sessionOf, s.id) }))
	h.r.checkDrops(time.Now(), l.emit)
	h.r.checkLost(l.emit)
	h.end(s)
}

// expireDrains ends the drains past Options.DrainTimeout with an
// events_lost record counting the kernel backlog, of which any record may
// be the session's.
func (h *Hub) expireDrains(l *loop) {
	now := time.Now()
	h.mu.Lock()
	var late []*Subscription
	for _, s := range append(append([]*Subscription(nil), h.waiting...), h.quiet...) {
		if now.After(s.deadline) {
			late = append(late, s)
		}
	}
	h.mu.Unlock()
	for _, s := range late {
		st, err := getStatus()
		lost := uint64(st.Backlog)
		if err != nil || lost == 0 {
			lost = 1 // the marker never came back: something was in its way
		}
		h.r.mu.Lock()
		h.r.stats.Unread += lost
		h.r.mu.Unlock()
		h.mu.Lock()
		if h.subs[s.id] == s {
			s.emit(audit.Record{
				Timestamp: now,
				Message: fmt.Sprintf("kernel audit drain of session %s stopped after %v without its marker: %d records of any kind "+
					"still in the kernel backlog (any of which may be a refusal of this session)", s.id, h.r.opts.DrainTimeout, st.Backlog),
				Ox: audit.Ox{Kind: audit.KindEventsLost, Layer: audit.LayerLandlock, Session: s.id, EventsLost: lost},
			})
		}
		h.mu.Unlock()
		h.finishDrain(l, s)
	}
}

func (h *Hub) sessionOfPID(pid int) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, s := range h.subs {
		if s.owns.PID != nil && s.owns.PID(pid) {
			return id, true
		}
	}
	return "", false
}

func (h *Hub) sessionOfAuditSession(ses uint32) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, s := range h.subs {
		if s.owns.AuditSession != nil && s.owns.AuditSession(ses) {
			return id, true
		}
	}
	return "", false
}

func remove(list []*Subscription, s *Subscription) []*Subscription {
	out := list[:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
