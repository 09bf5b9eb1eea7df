package session_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/openoxide/oxsupervise/session"
)

// FailureOf is the one mapping from Run's errors to what the CLI and the
// daemon report (README, "Exit codes").
func TestFailureOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want session.Failure
	}{
		{"boundary", &session.BoundaryError{Layer: session.LayerNetwork, Err: errors.New("no cgroup BPF")},
			session.Failure{Code: 125, Layer: session.LayerNetwork, Message: "boundary not built: layer network cannot be built: no cgroup BPF; nothing ran"}},
		{"wrapped boundary", fmt.Errorf("run: %w", &session.BoundaryError{Layer: session.LayerNetwork, Err: errors.New("EBUSY")}),
			session.Failure{Code: 125, Layer: session.LayerNetwork, Message: "boundary not built: layer network cannot be built: EBUSY; nothing ran"}},
		{"not found", &session.ExecError{Code: 127, Err: errors.New("nope: command not found in PATH")},
			session.Failure{Code: 127, Message: "nope: command not found in PATH"}},
		{"not executable", &session.ExecError{Code: 126, Err: errors.New("permission denied")},
			session.Failure{Code: 126, Message: "permission denied"}},
		{"other", errors.New("wait: no child"), session.Failure{Code: 1, Message: "wait: no child"}},
	} {
		if got := session.FailureOf(tc.err); got != tc.want {
			t.Errorf("%s: FailureOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
