package windows

import (
	"io"

	"github.com/openoxide/oxsupervise/audit"
)

// RunConfig is what Run needs besides the policy and the command.
type RunConfig struct {
	SessionID string
	// AllowDegraded runs policies whose deny-read or network parts this
	// backend cannot enforce, after stating so (the explicit flag).
	AllowDegraded bool
	// JournalDir holds the ACL undo journals; it must be private to the
	// supervisor's user. Stale journals found there are replayed first.
	JournalDir string
	// PolicyDigest goes into the session_start record.
	PolicyDigest string
	// Env is the command's environment (already scrubbed); nil means the
	// supervisor's own.
	Env []string
	Dir string
	// Stdin, Stdout and Stderr must be *os.File (their handles are
	// inherited); nil means the supervisor's own.
	Stdin  io.Reader
	Stdout io.Writer
	// Stderr also receives the backend's warnings.
	Stderr io.Writer
	// Audit receives the session_start record stating every missing
	// guarantee. Required: a degraded session must not go unrecorded.
	Audit func(*audit.Record) error
}
