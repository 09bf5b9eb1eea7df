//go:build linux

package planner

import (
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/landlock"
)

// Probe measures what the kernel offers the layers package session builds
// itself (cgroup v2, Landlock, the namespaces), with the layers named in
// unavailable marked so. BPFLSM, Network and ReadOnlyViewAudit are left for the enforcement
// host to fill in (see host.Host.Capabilities): they are what it loaded,
// not what the kernel might load.
func Probe(unavailable map[string]bool) Capabilities {
	return ProbeIn(cgroup.Config{}, unavailable)
}

// ProbeIn is Probe for a caller whose cgroup configuration may already
// know the cgroup2 mount (cgroup.Config.Resolved): that mount is checked
// (statfs) instead of being looked for in /proc/self/mountinfo again, a
// tenth of a millisecond of every run through the daemon (issue 18).
func ProbeIn(cfg cgroup.Config, unavailable map[string]bool) Capabilities {
	var caps Capabilities
	if _, err := (cgroup.Config{Mount: cfg.Mount}).Resolved(); err != nil {
		caps.Cgroup2 = err
	}
	caps.LandlockABI, caps.Landlock = landlock.ABI()
	caps.LandlockAudits = caps.Landlock == nil && caps.LandlockABI >= landlock.AuditABI
	caps.BPFLSM, caps.Network, caps.ReadOnlyViewAudit = ErrNotProvided, ErrNotProvided, ErrNotProvided
	return caps.Force(unavailable)
}
