//go:build linux

package bpfring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/openoxide/oxsupervise/loader"
)

// Header is the start of every record (struct oxs_event_header).
type Header struct {
	Source   loader.Source
	CgroupID uint64
	// Suppressed is the session's flood-control count when the record
	// was sent: it only grows.
	Suppressed uint64
}

// headerSize is sizeof(struct oxs_event_header).
const headerSize = 24

// ParseHeader reads the header of one raw record.
func ParseHeader(raw []byte) (Header, error) {
	if len(raw) < headerSize {
		return Header{}, fmt.Errorf("event of %d bytes is shorter than its header (%d)", len(raw), headerSize)
	}
	return Header{
		Source:     loader.Source(binary.NativeEndian.Uint32(raw[0:4])),
		CgroupID:   binary.NativeEndian.Uint64(raw[8:16]),
		Suppressed: binary.NativeEndian.Uint64(raw[16:24]),
	}, nil
}

// Consumer takes the records of one source. Its methods are called from
// the ring's reader goroutine, one at a time.
type Consumer interface {
	// Record handles one record; raw is only valid during the call.
	Record(h Header, raw []byte)
	// Lost reports n records of the source the kernel could not queue
	// (ring buffer full) since the last call. Whose they were is unknown.
	Lost(n uint64)
}

// Defaults of the per-session flood control: as many events as
// audit.FloodControl admits records by default, so the kernel does not
// suppress what userspace would have written.
const (
	DefaultFloodRate  = 100  // events per second, sustained
	DefaultFloodBurst = 1000 // events at once
)

// Options configure Open.
type Options struct {
	// Size of the ring buffer in bytes, a power of two; 0 means
	// loader.DefaultRingSize.
	Size int
	// Warn receives what has no consumer to go to and read errors.
	Warn io.Writer
	// Maps, when set, are event maps opened elsewhere (from their pins:
	// package host) to read instead of creating new ones; Size is then
	// theirs. The Ring owns them from here on.
	Maps *loader.EventMaps
}

// Ring is the shared ring buffer and its reader goroutine.
type Ring struct {
	maps *loader.EventMaps
	// rd reads the ring once it has held a record (mapRing); until then
	// the reader waits on idle, with the ring not mapped (idleWait says
	// why). Only the reader goroutine sets it.
	rd   atomic.Pointer[ringbuf.Reader]
	idle *idleWait
	warn io.Writer

	mu        sync.Mutex
	consumers map[loader.Source]Consumer
	// reported is the loss count per source already taken for passing on;
	// passed is the part of it whose Consumer.Lost call has returned.
	reported, passed [loader.Sources]uint64

	drainReq chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	closed   sync.Once
	closeErr error
}

// poll bounds how long the reader blocks before it looks at drain
// requests, and lostPoll is how often it reads the loss counter.
const (
	poll     = 50 * time.Millisecond
	lostPoll = time.Second
	// drainQueue is how many Drain requests wait for the reader without
	// blocking their callers.
	drainQueue = 16
)

// Open creates the shared event maps and starts reading them. Load the
// programs with Maps() so they report here.
func Open(opts Options) (*Ring, error) {
	size := opts.Size
	if size == 0 {
		size = loader.DefaultRingSize
	}
	maps := opts.Maps
	if maps == nil {
		var err error
		if maps, err = loader.NewEventMaps(size); err != nil {
			return nil, err
		}
	}
	idle, err := newIdleWait(maps.Ring.FD())
	if err != nil {
		maps.Close()
		return nil, err
	}
	r := &Ring{
		maps: maps, idle: idle, warn: opts.Warn, consumers: map[loader.Source]Consumer{},
		drainReq: make(chan chan struct{}, drainQueue), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if r.warn == nil {
		r.warn = io.Discard
	}
	// Maps that outlived an earlier reader count what it lost: those
	// losses are not this reader's sessions'.
	for src := loader.Source(1); src < loader.Sources; src++ {
		n, err := r.Lost(src)
		if err != nil {
			idle.close()
			maps.Close()
			return nil, err
		}
		r.reported[src], r.passed[src] = n, n
	}
	go r.loop()
	return r, nil
}

// Maps are the maps to load programs with (loader.LoadFS,
// loader.LoadNetPrograms).
func (r *Ring) Maps() *loader.EventMaps { return r.maps }

// Size is the ring buffer's size in bytes.
func (r *Ring) Size() int { return int(r.maps.Ring.MaxEntries()) }

// Subscribe sends the records and losses of src to c until the returned
// function is called. A source has at most one consumer.
func (r *Ring) Subscribe(src loader.Source, c Consumer) (unsubscribe func(), err error) {
	if src == 0 || src >= loader.Sources {
		return nil, fmt.Errorf("subscribe to event source %d: no such source", src)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.consumers[src]; ok {
		return nil, fmt.Errorf("subscribe to %s events: they have a consumer already", src)
	}
	r.consumers[src] = c
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.consumers[src] == c {
			delete(r.consumers, src)
		}
	}, nil
}

// Drain returns once every record queued when it was called has been
// handed to its consumer, and losses counted until then are reported. The
// programs queue a record before the refused syscall returns, so after a
// session's last task is gone Drain has passed all its records on.
func (r *Ring) Drain() {
	done := make(chan struct{})
	select {
	case r.drainReq <- done:
	case <-r.done:
		return
	}
	r.wakeReader()
	select {
	case <-done:
	case <-r.done:
	}
}

// wakeReader makes the reader look at its requests now: queued first,
// woken after, the wake-up stays pending (an eventfd) until the reader's
// next wait, which then returns at once, so none is lost between the two.
// Which wait that is depends on whether the ring is mapped yet; the reader
// sets rd before it looks at its requests again, so a waker that still
// finds rd nil has queued its request before that look.
func (r *Ring) wakeReader() {
	if rd := r.rd.Load(); rd != nil {
		rd.Flush()
		return
	}
	r.idle.wakeUp()
}

func (r *Ring) loop() {
	defer close(r.done)
	var rec ringbuf.Record
	if !r.awaitRecords(&rec) {
		return
	}
	rd := r.rd.Load()
	lostTick := time.NewTicker(lostPoll)
	defer lostTick.Stop()
	for {
		select {
		case <-r.stop:
			r.readQueued(&rec)
			r.checkLost()
			return
		case done := <-r.drainReq:
			r.readQueued(&rec)
			r.checkLost()
			close(done)
			continue
		case <-lostTick.C:
			r.checkLost()
		default:
		}
		rd.SetDeadline(time.Now().Add(poll))
		err := rd.ReadInto(&rec)
		switch {
		case err == nil:
			r.dispatch(rec.RawSample)
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, ringbuf.ErrFlushed):
		case errors.Is(err, ringbuf.ErrClosed):
			return
		default:
			fmt.Fprintf(r.warn, "oxsupervise: warning: kernel refusal events: %v\n", err)
			time.Sleep(poll)
		}
	}
}

// awaitRecords is the reader while the ring is not mapped: it serves
// Drain and Close and checks the losses as the loop does, and maps the
// ring as soon as a record is queued. It reports whether the loop goes on
// reading (false: Close stopped it). A Drain or Close that finds records
// queued maps the ring and reads them first: nothing queued goes unread.
func (r *Ring) awaitRecords(rec *ringbuf.Record) (reading bool) {
	nextLost := time.Now().Add(lostPoll)
	for {
		select {
		case <-r.stop:
			if r.mapIfQueued() {
				r.readQueued(rec)
			}
			r.checkLost()
			return false
		case done := <-r.drainReq:
			mapped := r.mapIfQueued()
			if mapped {
				r.readQueued(rec)
			}
			r.checkLost()
			close(done)
			if mapped {
				return true
			}
			continue
		default:
		}
		if !time.Now().Before(nextLost) {
			r.checkLost()
			nextLost = time.Now().Add(lostPoll)
		}
		queued, err := r.idle.wait(time.Until(nextLost))
		if err != nil {
			fmt.Fprintf(r.warn, "oxsupervise: warning: kernel refusal events: %v\n", err)
			time.Sleep(poll)
			continue
		}
		if queued && r.mapRing() {
			return true
		}
	}
}

// mapIfQueued maps the ring when records are queued, and reports whether
// it is mapped.
func (r *Ring) mapIfQueued() bool {
	queued, err := r.idle.queuedNow()
	if err != nil {
		fmt.Fprintf(r.warn, "oxsupervise: warning: kernel refusal events: %v\n", err)
		// Whether records wait is unknown: map, to read them if they do.
		queued = true
	}
	return queued && r.mapRing()
}

// mapRing maps the ring for reading (rd). A ring that cannot be mapped
// keeps its records queued (the programs count what no longer fits as
// lost), and the reader tries again at its next wait.
func (r *Ring) mapRing() bool {
	rd, err := ringbuf.NewReader(r.maps.Ring)
	if err != nil {
		fmt.Fprintf(r.warn, "oxsupervise: warning: kernel refusal events are queued but cannot be read: map the event ring buffer: %v\n", err)
		time.Sleep(poll)
		return false
	}
	r.rd.Store(rd)
	return true
}

// readQueued hands over every record in the ring buffer now.
func (r *Ring) readQueued(rec *ringbuf.Record) {
	rd := r.rd.Load()
	for {
		rd.SetDeadline(time.Now())
		if err := rd.ReadInto(rec); err != nil {
			return
		}
		r.dispatch(rec.RawSample)
	}
}

func (r *Ring) dispatch(raw []byte) {
	h, err := ParseHeader(raw)
	if err != nil {
		fmt.Fprintf(r.warn, "oxsupervise: warning: kernel refusal event dropped: %v\n", err)
		return
	}
	r.mu.Lock()
	c := r.consumers[h.Source]
	r.mu.Unlock()
	if c == nil {
		fmt.Fprintf(r.warn, "oxsupervise: warning: %s refusal of cgroup %d has no consumer: only this warning records it\n", h.Source, h.CgroupID)
		return
	}
	c.Record(h, raw)
}

func (r *Ring) checkLost() {
	for src := loader.Source(1); src < loader.Sources; src++ {
		n, err := r.Lost(src)
		if err != nil {
			fmt.Fprintf(r.warn, "oxsupervise: warning: %v\n", err)
			continue
		}
		r.mu.Lock()
		delta := n - min(n, r.reported[src])
		r.reported[src] = max(r.reported[src], n)
		c := r.consumers[src]
		r.mu.Unlock()
		if delta == 0 {
			continue
		}
		if c == nil {
			fmt.Fprintf(r.warn, "oxsupervise: warning: %d %s refusal events lost (ring buffer full)\n", delta, src)
		} else {
			c.Lost(delta)
		}
		r.mu.Lock()
		r.passed[src] = max(r.passed[src], n)
		r.mu.Unlock()
	}
}

// LossesPassedOn reports whether every loss of src the kernel has counted
// so far was passed on to its consumer (Consumer.Lost returned). With
// that, a consumer that has handled as many records of an ended session
// as the programs sent it (Counts.Sent) has nothing of the session left
// for Drain to find: no record in the ring and no loss to hear of. It is
// one map lookup where Drain is a round trip to the reader goroutine
// (0.2-1.2 ms on a loaded host, when a session's end wakes several
// goroutines at once).
func (r *Ring) LossesPassedOn(src loader.Source) (bool, error) {
	n, err := r.Lost(src)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return n <= r.passed[src], nil
}

// Lost returns how many records of src the kernel could not queue since
// the maps were created.
func (r *Ring) Lost(src loader.Source) (uint64, error) {
	var perCPU []uint64
	if err := r.maps.Lost.Lookup(uint32(src), &perCPU); err != nil {
		return 0, fmt.Errorf("read lost %s events: %w", src, err)
	}
	var sum uint64
	for _, n := range perCPU {
		sum += n
	}
	return sum, nil
}

// Counts are one session's event counts of one source.
type Counts struct {
	// Sent is how many records the programs put in the ring buffer.
	Sent uint64
	// Suppressed is how many refusals flood control counted instead.
	Suppressed uint64
}

// StartSession creates the session's flood-control bucket for src: burst
// events at once, then rate per second; rate <= 0 turns the limit off
// but keeps the counts. Call it before the programs judge the session, so
// that every refusal is counted.
func (r *Ring) StartSession(cgroupID uint64, src loader.Source, rate float64, burst int) error {
	var b loader.FloodBucket
	if rate > 0 {
		b.IntervalNs = uint64(float64(time.Second) / rate)
		b.BurstNs = b.IntervalNs * uint64(max(burst-1, 0))
	}
	key := loader.FloodKey{CgroupId: cgroupID, Source: uint32(src)}
	if err := r.maps.Flood.Update(key, b, ebpf.UpdateNoExist); err != nil {
		return fmt.Errorf("%s flood control of cgroup %d: %w", src, cgroupID, err)
	}
	return nil
}

// Counts returns the session's counts for src. Once its tasks are gone
// they are final.
func (r *Ring) Counts(cgroupID uint64, src loader.Source) (Counts, error) {
	var b loader.FloodBucket
	key := loader.FloodKey{CgroupId: cgroupID, Source: uint32(src)}
	if err := r.maps.Flood.Lookup(key, &b); err != nil {
		return Counts{}, fmt.Errorf("read %s event counts of cgroup %d: %w", src, cgroupID, err)
	}
	return Counts{Sent: b.Sent, Suppressed: b.Suppressed}, nil
}

// EndSession drops the session's bucket for src.
func (r *Ring) EndSession(cgroupID uint64, src loader.Source) error {
	key := loader.FloodKey{CgroupId: cgroupID, Source: uint32(src)}
	if err := r.maps.Flood.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("drop %s flood control of cgroup %d: %w", src, cgroupID, err)
	}
	return nil
}

// Close reads what is queued, stops the reader and releases this
// process's references to the maps. Close the programs' collections
// first: what they report after this is not read.
func (r *Ring) Close() error {
	r.closed.Do(func() {
		close(r.stop)
		// Wake a reader blocked in its poll, as Drain does: a session's
		// end must not wait out the poll interval.
		r.wakeReader()
		<-r.done
		var rdErr error
		if rd := r.rd.Load(); rd != nil {
			rdErr = rd.Close()
		}
		r.closeErr = errors.Join(rdErr, r.idle.close(), r.maps.Close())
	})
	return r.closeErr
}

// Funcs is a Consumer made of two functions; a nil one ignores its calls.
type Funcs struct {
	OnRecord func(h Header, raw []byte)
	OnLost   func(n uint64)
}

// Record implements Consumer.
func (f Funcs) Record(h Header, raw []byte) {
	if f.OnRecord != nil {
		f.OnRecord(h, raw)
	}
}

// Lost implements Consumer.
func (f Funcs) Lost(n uint64) {
	if f.OnLost != nil {
		f.OnLost(n)
	}
}
