package quarantine

import (
	"io"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/policy"
)

// DefaultDir is where quarantined entries go, one directory per session.
const DefaultDir = "/var/lib/oxsupervise/quarantine"

// Options configure a Watch.
type Options struct {
	// Session is the session id: the quarantine subdirectory.
	Session string
	Policy  *policy.Compiled
	// Dir is the quarantine base directory; "" means DefaultDir.
	Dir string
	// InSession says whether pid belongs to the session; known is false
	// when the pid cannot be looked up (it exited).
	InSession func(pid int) (in, known bool)
	// Ignore are directories (writable roots, or below one) whose entries
	// take effect nowhere: not watched, not checked.
	Ignore []string
	// Mounts are the caller's mounts (mountinfo.Read) when it read them
	// for its other layers too (each read is ~0.1 ms, issue 18); nil
	// reads them: the watch marks every filesystem mounted below a root.
	Mounts []mountinfo.Mount
	// Report receives every entry moved (or that could not be moved).
	Report func(Moved)
	// Warn receives warnings (one line each); nil discards them.
	Warn io.Writer
}

// Moved is one protected entry the session created, and where it went.
type Moved struct {
	// Path is where the entry was created; To is where it is now ("" when
	// Err is set).
	Path, To string
	// PID made it; 0 when the final check found it.
	PID     int
	Pattern policy.ProtectedPattern
	// Reason says why it was moved.
	Reason string
	Err    error
}
