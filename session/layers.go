package session

import (
	"fmt"
	"strings"
)

// Layer names, as they appear in messages, registry entries and audit
// records.
const (
	LayerCgroup   = "cgroup"
	LayerMountNS  = "mount-namespace"
	LayerLandlock = "landlock"
	LayerBPFLSM   = "bpf-lsm"
	LayerNetwork  = "network"
)

// ForceUnavailableEnv names the environment variable that marks layers as
// unavailable (comma-separated layer names). It exists to prove the
// fail-closed path in tests and can only ever make `run` refuse, never
// weaken a boundary.
const ForceUnavailableEnv = "OXSUPERVISE_FORCE_UNAVAILABLE"

// ParseUnavailable parses the value of ForceUnavailableEnv.
func ParseUnavailable(v string) map[string]bool {
	out := map[string]bool{}
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out[name] = true
		}
	}
	return out
}

// BoundaryError means a layer the policy needs could not be built; nothing
// of the command ran.
type BoundaryError struct {
	Layer string
	Err   error
}

func (e *BoundaryError) Error() string {
	return fmt.Sprintf("layer %s cannot be built: %v", e.Layer, e.Err)
}

func (e *BoundaryError) Unwrap() error { return e.Err }

// ExecError means the boundary was built but the command could not be
// executed (not found, not executable); Code is the shell convention
// (127 not found, 126 otherwise).
type ExecError struct {
	Code int
	Err  error
}

func (e *ExecError) Error() string { return e.Err.Error() }

func (e *ExecError) Unwrap() error { return e.Err }
