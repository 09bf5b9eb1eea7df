package session

import (
	"errors"
	"fmt"
)

// ExitNoBoundary is the exit status of a supervisor whose session's
// boundary could not be built: nothing of the command ran (README, "Exit
// codes").
const ExitNoBoundary = 125

// Failure is how a supervisor reports a Run that failed: the standalone
// CLI prints it, the daemon sends it as the final event of POST /sessions.
type Failure struct {
	// Code is the exit status: ExitNoBoundary for a *BoundaryError, the
	// shell's 126/127 for an *ExecError, 1 otherwise.
	Code int
	// Layer is the layer that could not be built (boundary errors only).
	Layer   string
	Message string
}

// FailureOf describes err, a non-nil error of Run.
func FailureOf(err error) Failure {
	var be *BoundaryError
	var ee *ExecError
	switch {
	case errors.As(err, &be):
		return Failure{Code: ExitNoBoundary, Layer: be.Layer, Message: fmt.Sprintf("boundary not built: %v; nothing ran", be)}
	case errors.As(err, &ee):
		return Failure{Code: ee.Code, Message: ee.Error()}
	}
	return Failure{Code: 1, Message: err.Error()}
}
