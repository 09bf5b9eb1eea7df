package audit

import "time"

// Filter selects records; zero fields match everything and set fields
// must all match.
type Filter struct {
	Session string
	PID     int
	// Op matches event.action (the denied operation, or the kind's name
	// for non-denial records).
	Op    string
	Since time.Time
}

// Match reports whether r passes every set field of f.
func (f Filter) Match(r *Record) bool {
	if f.Session != "" && r.Ox.Session != f.Session {
		return false
	}
	if f.PID != 0 && (r.Process == nil || r.Process.PID != f.PID) {
		return false
	}
	if f.Op != "" && r.Event.Action != f.Op {
		return false
	}
	if !f.Since.IsZero() && r.Timestamp.Before(f.Since) {
		return false
	}
	return true
}
