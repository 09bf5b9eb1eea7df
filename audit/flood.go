package audit

import (
	"sort"
	"sync"
	"time"
)

// Writer is anything records can be written to; FileSink is one.
type Writer interface {
	Write(*Record) error
}

// FloodOptions configure FloodControl.
type FloodOptions struct {
	// Rate is the sustained number of denial records per second each
	// session may write (default 100).
	Rate float64
	// Burst is how many denial records a session may write at once
	// (default 1000).
	Burst int
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// FloodControl is a per-session token bucket in front of a Writer for
// producers that have no kernel-side flood control (Landlock via kernel
// audit, the resolver). Only denials are limited. A denial over the limit
// is counted, never dropped unseen: the count goes out as a suppressed
// record for the session before its next admitted denial, and on Flush.
// Per session, denial records plus the suppressed counts equal the denials
// written to it.
type FloodControl struct {
	next Writer
	opts FloodOptions

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens     float64
	last       time.Time
	suppressed uint64
	layer      Layer
}

// NewFloodControl returns a FloodControl writing to next.
func NewFloodControl(next Writer, opts FloodOptions) *FloodControl {
	if opts.Rate <= 0 {
		opts.Rate = 100
	}
	if opts.Burst <= 0 {
		opts.Burst = 1000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &FloodControl{next: next, opts: opts, buckets: map[string]*bucket{}}
}

// Write passes r on, or counts it if its session is over its limit.
func (f *FloodControl) Write(r *Record) error {
	if r.Ox.Kind != KindDenial {
		return f.next.Write(r)
	}
	f.mu.Lock()
	now := f.opts.Now()
	b := f.buckets[r.Ox.Session]
	if b == nil {
		b = &bucket{tokens: float64(f.opts.Burst), last: now}
		f.buckets[r.Ox.Session] = b
	}
	b.tokens = min(float64(f.opts.Burst), b.tokens+now.Sub(b.last).Seconds()*f.opts.Rate)
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		b.layer = r.Ox.Layer
		f.mu.Unlock()
		return nil
	}
	b.tokens--
	summary := f.takeSummaryLocked(r.Ox.Session, b, now)
	f.mu.Unlock()
	if summary != nil {
		if err := f.next.Write(summary); err != nil {
			f.restore(r.Ox.Session, summary)
			return err
		}
	}
	return f.next.Write(r)
}

func (f *FloodControl) takeSummaryLocked(session string, b *bucket, now time.Time) *Record {
	if b.suppressed == 0 {
		return nil
	}
	s := &Record{Timestamp: now, Ox: Ox{Kind: KindSuppressed, Session: session, Layer: b.layer, Suppressed: b.suppressed}}
	b.suppressed = 0
	return s
}

// restore puts back a count whose summary could not be written, so it is
// reported later instead of vanishing.
func (f *FloodControl) restore(session string, summary *Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.buckets[session]; b != nil {
		b.suppressed += summary.Ox.Suppressed
	}
}

// Flush writes a suppressed record for every session with uncounted
// denials. Call it periodically and when a session stops (before its
// session_stop record).
func (f *FloodControl) Flush() error {
	f.mu.Lock()
	now := f.opts.Now()
	sessions := make([]string, 0, len(f.buckets))
	for s := range f.buckets {
		sessions = append(sessions, s)
	}
	sort.Strings(sessions)
	var summaries []*Record
	for _, s := range sessions {
		if sum := f.takeSummaryLocked(s, f.buckets[s], now); sum != nil {
			summaries = append(summaries, sum)
		}
	}
	f.mu.Unlock()
	for i, sum := range summaries {
		if err := f.next.Write(sum); err != nil {
			for _, rest := range summaries[i:] {
				f.restore(rest.Ox.Session, rest)
			}
			return err
		}
	}
	return nil
}

// Forget drops a stopped session's bucket after flushing its count.
func (f *FloodControl) Forget(session string) error {
	f.mu.Lock()
	b := f.buckets[session]
	var sum *Record
	if b != nil {
		sum = f.takeSummaryLocked(session, b, f.opts.Now())
		delete(f.buckets, session)
	}
	f.mu.Unlock()
	if sum != nil {
		return f.next.Write(sum)
	}
	return nil
}
