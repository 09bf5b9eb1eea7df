package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// ExitCode is the one mapping from a daemon's answer to the CLI's exit
// status (README, "Exit codes").
func TestExitCode(t *testing.T) {
	wrapped := func(e *Error) error { return fmt.Errorf("daemon at /x: %w", e) }
	for _, tc := range []struct {
		name    string
		err     error
		refused int
		want    int
	}{
		{"bad request", errorf(http.StatusBadRequest, "bad_request", "argv: no command given"), ExitFail, ExitUsage},
		{"unknown field", errorf(http.StatusBadRequest, "unknown_field", `unknown field "uid"`), ExitNoBoundary, ExitUsage},
		{"policy", wrapped(errorf(http.StatusBadRequest, "policy", "policy: x:1:2: bad value")), ExitNoBoundary, ExitUsage},
		{"too large", errorf(http.StatusRequestEntityTooLarge, "too_large", "larger"), ExitFail, ExitUsage},
		{"boundary", errorf(http.StatusInternalServerError, "boundary", "boundary not built"), ExitFail, ExitNoBoundary},
		{"forbidden, plain verb", errorf(http.StatusForbidden, "forbidden", "not yours"), ExitFail, ExitFail},
		{"forbidden, run", errorf(http.StatusForbidden, "forbidden", "inside a session"), ExitNoBoundary, ExitNoBoundary},
		{"busy", errorf(http.StatusServiceUnavailable, "busy", "limit"), ExitFail, ExitFail},
		{"no daemon", errors.New("daemon at /x: connection refused"), ExitFail, ExitFail},
		{"other error, run", errors.New("EOF"), ExitNoBoundary, ExitNoBoundary},
	} {
		if got := ExitCode(tc.err, tc.refused); got != tc.want {
			t.Errorf("%s: ExitCode(%v, %d) = %d, want %d", tc.name, tc.err, tc.refused, got, tc.want)
		}
	}
}
