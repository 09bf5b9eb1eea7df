//go:build !linux

package landlock

import (
	"errors"

	"github.com/openoxide/oxsupervise/policy"
)

var errNotSupported = errors.New("landlock: not supported on this OS")

// Ruleset is the Landlock ruleset a session needs (Linux only).
type Ruleset struct {
	ABI int
}

// ABI reports the Landlock ABI version of the running kernel.
func ABI() (int, error) { return 0, errNotSupported }

// Plan computes the ruleset for c.
func Plan(c *policy.Compiled, abi int) (*Ruleset, []string, error) {
	return nil, nil, errNotSupported
}

// MountPlan is the launcher's mount namespace plan (Linux only).
type MountPlan struct{}

// PlanMounts computes the mount plan for c.
func PlanMounts(c *policy.Compiled, rs *Ruleset) (MountPlan, error) {
	return MountPlan{}, errNotSupported
}

// Apply changes the mount namespace.
func (m MountPlan) Apply() error { return errNotSupported }
