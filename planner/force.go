package planner

import (
	"errors"
	"strings"
)

// ForceUnavailableEnv names the environment variable that marks layers as
// unavailable (comma-separated layer names). It exists to prove the
// fail-closed path in tests and can only ever make a session refuse or
// fall back, never weaken a boundary.
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

// ErrForced is the reason of a layer marked unavailable by
// ForceUnavailableEnv.
var ErrForced = errors.New("marked unavailable by " + ForceUnavailableEnv)

// Force marks the layers named in unavailable as unavailable.
func (caps Capabilities) Force(unavailable map[string]bool) Capabilities {
	for name, field := range map[string]*error{
		LayerCgroup: &caps.Cgroup2, LayerMountNS: &caps.MountNS, LayerLandlock: &caps.Landlock,
		LayerBPFLSM: &caps.BPFLSM, LayerNetwork: &caps.Network, LayerNetNS: &caps.NetNS,
		LayerReadOnlyViewAudit: &caps.ReadOnlyViewAudit,
	} {
		if unavailable[name] {
			*field = ErrForced
		}
	}
	if unavailable[LayerLandlock] {
		caps.LandlockAudits = false
	}
	return caps
}
