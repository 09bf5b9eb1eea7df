//go:build linux

package session

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/bpfring"
	"github.com/openoxide/oxsupervise/loader"
)

// kernelEvents is what the two BPF layers (FSLayer, NetworkLayer) share:
// the sessions they apply, each with its audit log, fed with the records
// of one source of the shared ring buffer (package audit/bpfring), and the
// accounting that makes a session's refusals add up exactly — denial
// records plus suppressed plus events_lost.
type kernelEvents struct {
	src   loader.Source
	layer audit.Layer
	what  string // "filesystem" or "network", in messages
	ring  *bpfring.Ring
	// ownRing is set when the layer opened the ring itself (no shared
	// one was given) and closes it.
	ownRing     bool
	unsubscribe func()
	warn        io.Writer
	flood       audit.FloodOptions
	// record builds the audit record of one raw event; nil (and no
	// error) for an event that is no refusal.
	record func(s *eventSession, h bpfring.Header, raw []byte) (*audit.Record, error)
	// forget drops a session's rules from the programs.
	forget func(cgroupID uint64) error

	mu       sync.Mutex
	sessions map[uint64]*eventSession
	closed   bool

	stop      chan struct{}
	flushDone chan struct{}
}

// eventSession is one session of a BPF layer.
type eventSession struct {
	sessionAudit
	// rules is set once the programs hold rules for the session (a
	// policy without filesystem rules adds none to the BPF-LSM layer).
	rules bool
	// emu orders the reader's writes against end: once ended is set no
	// record of the session is written, so read is final.
	emu   sync.Mutex
	ended bool
	// read counts the session's events handled.
	read uint64
	// suppressed is the programs' flood-control count already written
	// as suppressed records (bpfring.Header.Suppressed only grows).
	suppressed uint64
	// created is SessionInfo.Created.
	created CreatedEntries
}

// flushPoll is how often userspace flood control writes its summaries.
const flushPoll = time.Second

// settleMax bounds how long a session's end waits for its events still in
// the ring buffer; what is unread then is reported as lost.
const settleMax = 30 * time.Second

// newKernelEvents subscribes k to its source of ring, or of a ring of its
// own when ring is nil. Set record and forget before the first session.
func newKernelEvents(k *kernelEvents, ring *bpfring.Ring, warn io.Writer) error {
	k.warn = warnOrDiscard(warn)
	k.sessions = map[uint64]*eventSession{}
	k.stop, k.flushDone = make(chan struct{}), make(chan struct{})
	if ring == nil {
		r, err := bpfring.Open(bpfring.Options{Warn: k.warn})
		if err != nil {
			return err
		}
		ring, k.ownRing = r, true
	}
	k.ring = ring
	unsub, err := ring.Subscribe(k.src, k)
	if err != nil {
		if k.ownRing {
			ring.Close()
		}
		return err
	}
	k.unsubscribe = unsub
	go k.flushLoop()
	return nil
}

// open registers s and creates its flood-control bucket, both before the
// programs judge it: the first refusal may come before the rules are all
// written.
func (k *kernelEvents) open(s SessionInfo) (*eventSession, error) {
	es := &eventSession{sessionAudit: openSessionAudit(s, k.flood, k.warn, k.what), created: s.Created}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		es.close(k.warn)
		return nil, fmt.Errorf("%s layer already closed", k.what)
	}
	if _, ok := k.sessions[s.CgroupID]; ok {
		k.mu.Unlock()
		es.close(k.warn)
		return nil, fmt.Errorf("%s layer: cgroup %d is applied already", k.what, s.CgroupID)
	}
	k.sessions[s.CgroupID] = es
	k.mu.Unlock()
	// The kernel limits each session's events as FloodControl limits its
	// records, so the ring buffer is not filled by what would be
	// suppressed anyway.
	rate, burst := k.flood.Rate, k.flood.Burst
	if rate <= 0 {
		rate = bpfring.DefaultFloodRate
	}
	if burst <= 0 {
		burst = bpfring.DefaultFloodBurst
	}
	if err := k.ring.StartSession(s.CgroupID, k.src, rate, burst); err != nil {
		k.abort(s.CgroupID)
		return nil, err
	}
	return es, nil
}

// abort undoes open when the rules could not be applied.
func (k *kernelEvents) abort(cgroupID uint64) {
	k.mu.Lock()
	es := k.sessions[cgroupID]
	delete(k.sessions, cgroupID)
	k.mu.Unlock()
	k.ring.EndSession(cgroupID, k.src)
	if es != nil {
		es.close(k.warn)
	}
}

func (k *kernelEvents) session(cgroupID uint64) *eventSession {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sessions[cgroupID]
}

// Record implements bpfring.Consumer.
func (k *kernelEvents) Record(h bpfring.Header, raw []byte) {
	es := k.session(h.CgroupID)
	if es == nil {
		// The programs only report sessions this layer added; one that
		// was removed meanwhile has nowhere to go but the terminal.
		fmt.Fprintf(k.warn, "oxsupervise: warning: %s refusal of an unknown session (cgroup %d)\n", k.what, h.CgroupID)
		return
	}
	es.emu.Lock()
	defer es.emu.Unlock()
	if es.ended {
		// end counted it as lost already.
		return
	}
	es.read++
	// Also without an audit log: a record may be a report the session's
	// end depends on (SessionInfo.Created) rather than a refusal.
	r, err := k.record(es, h, raw)
	if es.w == nil {
		return
	}
	if delta := h.Suppressed - min(h.Suppressed, es.suppressed); delta > 0 {
		es.suppressed = h.Suppressed
		writeRecord(es.w, k.suppressedRecord(es.id, delta), k.warn)
	}
	if r == nil && err == nil {
		return // nothing to log
	}
	if err != nil {
		fmt.Fprintf(k.warn, "oxsupervise: warning: %s refusal of session %s: %v\n", k.what, es.id, err)
		r = k.lostRecord(1, "the kernel's record could not be decoded")
		r.Ox.Session = es.id
	}
	writeRecord(es.w, r, k.warn)
}

// Lost implements bpfring.Consumer. The kernel cannot say whose events it
// lost: every session's log hears about it, and the terminal too.
func (k *kernelEvents) Lost(n uint64) {
	k.mu.Lock()
	var sinks []audit.Writer
	for _, es := range k.sessions {
		if es.sink != nil {
			sinks = append(sinks, es.sink)
		}
	}
	k.mu.Unlock()
	fmt.Fprintf(k.warn, "oxsupervise: warning: %d %s refusal events lost (ring buffer full)\n", n, k.what)
	for _, w := range sinks {
		writeRecord(w, k.lostRecord(n, "the kernel ring buffer was full"), k.warn)
	}
}

func (k *kernelEvents) lostRecord(n uint64, why string) *audit.Record {
	return &audit.Record{
		Message: fmt.Sprintf("%d %s refusal events lost: %s", n, k.what, why),
		Ox:      audit.Ox{Kind: audit.KindEventsLost, Layer: k.layer, EventsLost: n},
	}
}

func (k *kernelEvents) suppressedRecord(session string, n uint64) *audit.Record {
	return &audit.Record{
		Message: fmt.Sprintf("%d %s refusals not logged one by one (kernel flood control)", n, k.what),
		Ox:      audit.Ox{Kind: audit.KindSuppressed, Session: session, Layer: k.layer, Suppressed: n},
	}
}

func (k *kernelEvents) flushLoop() {
	defer close(k.flushDone)
	tick := time.NewTicker(flushPoll)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-tick.C:
			k.mu.Lock()
			var ws []*audit.FloodControl
			for _, es := range k.sessions {
				if es.w != nil {
					ws = append(ws, es.w)
				}
			}
			k.mu.Unlock()
			flushSuppressed(ws, k.warn)
		}
	}
}

// end ends one session once its group is empty: its queued refusals are
// written (the programs' rules explain them only while the session
// exists), the counts settled, then its rules are dropped.
func (k *kernelEvents) end(cgroupID uint64) error {
	es := k.session(cgroupID)
	if es == nil {
		return nil
	}
	k.settle(es, cgroupID)
	var err error
	if es.rules {
		err = k.forget(cgroupID)
	}
	k.mu.Lock()
	delete(k.sessions, cgroupID)
	k.mu.Unlock()
	err = errors.Join(err, k.ring.EndSession(cgroupID, k.src))
	es.close(k.warn)
	return err
}

// settle accounts for every refusal of an ended session: it waits until
// the reader has handled as many records as the programs sent, then stops
// it writing for the session and reports what is still unread as
// events_lost and the final flood-control count as suppressed.
func (k *kernelEvents) settle(es *eventSession, cgroupID uint64) {
	counts, err := k.ring.Counts(cgroupID, k.src)
	if err != nil {
		fmt.Fprintf(k.warn, "oxsupervise: warning: %v\n", err)
		if es.created != nil {
			es.created.Incomplete(fmt.Sprintf("the %s events of session %s cannot be counted (%v)", k.what, es.id, err))
		}
	}
	if err != nil || !k.caughtUp(es, counts) {
		k.ring.Drain()
	}
	deadline := time.Now().Add(settleMax)
	for {
		es.emu.Lock()
		if es.read >= counts.Sent || !time.Now().Before(deadline) {
			es.ended = true
			es.emu.Unlock()
			break
		}
		es.emu.Unlock()
		time.Sleep(10 * time.Millisecond)
		k.ring.Drain()
	}
	if err != nil {
		return
	}
	es.emu.Lock()
	suppressed := counts.Suppressed - min(counts.Suppressed, es.suppressed)
	es.suppressed = max(es.suppressed, counts.Suppressed)
	unread := counts.Sent - min(counts.Sent, es.read)
	es.emu.Unlock()
	if unread > 0 && es.created != nil {
		es.created.Incomplete(fmt.Sprintf("%d %s events of session %s not read before it ended", unread, k.what, es.id))
	}
	if es.w == nil {
		return
	}
	if suppressed > 0 {
		writeRecord(es.w, k.suppressedRecord(es.id, suppressed), k.warn)
	}
	if unread > 0 {
		fmt.Fprintf(k.warn, "oxsupervise: warning: %d %s refusal events of session %s not read before it ended\n", unread, k.what, es.id)
		r := k.lostRecord(unread, "not read before the session ended")
		r.Ox.Session = es.id
		writeRecord(es.w, r, k.warn)
	}
}

// caughtUp reports whether the reader has handed over everything of the
// ended session es, whose final counts are counts: as many of its records
// as the programs sent (the count grows after each submit, and its tasks
// are gone) and every loss the kernel counted. Then Drain would find
// nothing; a session without refusals (most) skips its round trip.
func (k *kernelEvents) caughtUp(es *eventSession, counts bpfring.Counts) bool {
	es.emu.Lock()
	read := es.read
	es.emu.Unlock()
	if read < counts.Sent {
		return false
	}
	passed, err := k.ring.LossesPassedOn(k.src)
	return err == nil && passed
}

// closeAll ends every session still applied, then closes the programs
// (closePrograms) and, if it is the layer's own, the ring.
func (k *kernelEvents) closeAll(closePrograms func() error) error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	ids := make([]uint64, 0, len(k.sessions))
	for id := range k.sessions {
		ids = append(ids, id)
	}
	k.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, k.end(id))
	}
	close(k.stop)
	<-k.flushDone
	errs = append(errs, closePrograms())
	k.unsubscribe()
	if k.ownRing {
		errs = append(errs, k.ring.Close())
	}
	return errors.Join(errs...)
}
