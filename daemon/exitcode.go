package daemon

import (
	"errors"

	"github.com/openoxide/oxsupervise/session"
)

// Exit statuses of the CLI (README, "Exit codes") that a request to the
// daemon can end in. cmd/oxsupervise's exit codes are these constants, so
// that RunCLI and the verbs agree.
const (
	ExitFail       = 1                      // the verb ran and failed
	ExitUsage      = 2                      // the request was invalid
	ExitNoBoundary = session.ExitNoBoundary // run/attach: the boundary could not be built; nothing ran
)

// usageCodes are the Error codes of requests the daemon refused as
// invalid: the caller's mistake, as a bad flag is.
var usageCodes = map[string]bool{"bad_request": true, "unknown_field": true, "policy": true, "too_large": true}

// ExitCode is the exit status of a verb whose request to the daemon
// failed with err: ExitUsage for a request the daemon found invalid,
// ExitNoBoundary for a boundary it could not build, and refused for
// everything else (forbidden, not found, conflict, busy, no daemon).
// refused is ExitFail for most verbs; run passes ExitNoBoundary, since
// whatever stopped its request, the command never ran.
func ExitCode(err error, refused int) int {
	var e *Error
	if errors.As(err, &e) {
		switch {
		case usageCodes[e.Code]:
			return ExitUsage
		case e.Code == "boundary":
			return ExitNoBoundary
		}
	}
	return refused
}
