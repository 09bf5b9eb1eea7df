// Package phasetime prints how long each phase of a session's start and
// end takes: `OXSUPERVISE_DEBUG_TIMING=1 oxsupervise run -- CMD` writes one
// line per phase to stderr, the wall time since the previous phase and
// since the verb started. It is how start-up cost is found (issue 18);
// nothing reads it back. A nil *Recorder records nothing, so callers mark
// phases unconditionally.
package phasetime

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Env enables a Recorder for `run` when set to a non-empty value.
const Env = "OXSUPERVISE_DEBUG_TIMING"

// Recorder writes one line per Mark.
type Recorder struct {
	mu          sync.Mutex
	w           io.Writer
	start, last time.Time
}

// New returns a Recorder writing to w, its clock starting now.
func New(w io.Writer) *Recorder { return NewSince(w, time.Now()) }

// NewSince returns a Recorder writing to w whose clock started at start
// (a request's arrival, before what decides whether it is timed).
func NewSince(w io.Writer, start time.Time) *Recorder {
	return &Recorder{w: w, start: start, last: start}
}

// FromEnv returns New(w) when value (the Env variable's) is set, else nil.
func FromEnv(value string, w io.Writer) *Recorder {
	if value == "" {
		return nil
	}
	return New(w)
}

// Mark ends the phase named phase: it prints how long it took since the
// previous Mark (or New) and the time since New.
func (r *Recorder) Mark(phase string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	fmt.Fprintf(r.w, "oxsupervise: timing: %-34s %8.3f ms  (at %8.3f ms)\n", phase, ms(now.Sub(r.last)), ms(now.Sub(r.start)))
	r.last = now
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
