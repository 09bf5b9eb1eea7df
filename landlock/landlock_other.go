//go:build !linux

package landlock

import (
	"errors"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/launcher"
	"github.com/openoxide/oxsupervise/policy"
)

var errNotSupported = errors.New("landlock: not supported on this OS")

// ABI reports the Landlock ABI version of the running kernel.
func ABI() (int, error) { return 0, errNotSupported }

// Plan computes the ruleset for c.
func Plan(c *policy.Compiled, abi int) (*launcher.Ruleset, []string, error) {
	return nil, nil, errNotSupported
}

// PlanMounts computes the mount plan for c.
func PlanMounts(c *policy.Compiled, rs *launcher.Ruleset, mounts []mountinfo.Mount) (launcher.MountPlan, error) {
	return launcher.MountPlan{}, errNotSupported
}
