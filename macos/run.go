package macos

import (
	"io"

	"github.com/openoxide/oxsupervise/audit"
)

// RunConfig is what Run needs besides the policy and the command.
type RunConfig struct {
	Options
	// Env is the command's environment (already scrubbed by the caller);
	// nil means the supervisor's own.
	Env []string
	// Dir is the command's working directory; "" means the current one.
	Dir    string
	Stdin  io.Reader
	Stdout io.Writer
	// Stderr also receives the backend's warnings.
	Stderr io.Writer
	// Audit receives the session's Seatbelt denials. When nil, no log
	// stream is started.
	Audit func(*audit.Record) error
}

// SandboxExecPath is the only sandbox-exec Run uses: a sandbox-exec found
// through $PATH could be anyone's.
const SandboxExecPath = "/usr/bin/sandbox-exec"

// LogPath is the unified-log tool Run reads denials from.
const LogPath = "/usr/bin/log"
