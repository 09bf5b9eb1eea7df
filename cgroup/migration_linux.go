//go:build linux

package cgroup

import (
	"fmt"
	"time"
)

// MigrationCost is what moving a process between groups costs on this
// machine, measured by ProbeMigration: the part of a nested session's start
// that depends on how the kernel locks migrations, not on oxsupervise.
//
// A move into a group takes cgroup_threadgroup_rwsem for writing, which
// waits for an RCU grace period unless another writer took it within the
// last one: Quiet pays that wait, Warm (right after Quiet) does not. With
// cgroup2's favordynmods, or on kernels that lock each thread group on its
// own once favordynmods was set (Linux 6.18 keeps that until reboot, even
// when a remount clears the option), neither waits. So the mount options
// alone do not tell; the two timings do.
type MigrationCost struct {
	Quiet, Warm time.Duration
}

// gracePeriodFloor is the least excess of Quiet over Warm read as a wait
// for a grace period: one is several scheduler ticks (1-4 ms each), and a
// single write to cgroup.procs on a busy machine varies by less.
const gracePeriodFloor = time.Millisecond

// MigrationQuiet is the quiet spell doctor and the bench give
// ProbeMigration: several RCU grace periods, so that a wait for one shows.
const MigrationQuiet = 100 * time.Millisecond

// WaitsForGracePeriod reports whether a migration after a quiet spell
// waited for an RCU grace period that one right after another did not.
func (c MigrationCost) WaitsForGracePeriod() bool { return c.Quiet-c.Warm >= gracePeriodFloor }

// ProbeMigration measures MigrationCost with MigrateSelfInPlace (a
// migration that moves nothing): once after quiet, a spell in which this
// process migrates nothing (no other writer on the machine should either,
// for the reading to hold), then once at once after it. It needs write
// access to the calling process's own cgroup.procs below mount (root).
func ProbeMigration(mount string, quiet time.Duration) (MigrationCost, error) {
	var c MigrationCost
	time.Sleep(quiet)
	for _, d := range []*time.Duration{&c.Quiet, &c.Warm} {
		start := time.Now()
		if err := MigrateSelfInPlace(mount); err != nil {
			return MigrationCost{}, fmt.Errorf("time a migration: %w", err)
		}
		*d = time.Since(start)
	}
	return c, nil
}
