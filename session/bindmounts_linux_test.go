//go:build linux

package session

import (
	"slices"
	"testing"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
)

// The mount plan is bound from the mounts the caller read
// (RunOptions.Mounts, a standalone run's one read of the table), and
// from the table read then when none were given: a cgroup2 mount listed
// only in the given ones is among the plan's read-only kernel
// interfaces exactly when they are given.
func TestBindPlansFromTheMountsGiven(t *testing.T) {
	real, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	const fake = "/oxs-bind-test-cgroup2"
	given := append(slices.Clone(real), mountinfo.Mount{Root: "/", Point: fake, FSType: "cgroup2", Source: "cgroup2"})
	ws := policy.Anchor{Path: t.TempDir(), Exists: true}
	c := &policy.Compiled{Mode: policy.ModeWorkspaceWrite, FilesystemRules: true, WritableRoots: []policy.Anchor{ws}}
	lp := &planner.Plan{Verb: planner.Run, Landlock: planner.Absent, MountNS: true}
	for _, tc := range []struct {
		name     string
		mounts   []mountinfo.Mount
		wantFake bool
	}{
		{"mounts given", given, true},
		{"none given: read at bind", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := bind(c, lp, tc.mounts)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(p.Mounts.ReadOnly, fake); got != tc.wantFake {
				t.Errorf("read-only kernel interfaces %v: %s among them = %v, want %v", p.Mounts.ReadOnly, fake, got, tc.wantFake)
			}
			if tc.mounts != nil && len(p.mounts) != len(tc.mounts) {
				t.Errorf("the session keeps %d mounts, %d were given", len(p.mounts), len(tc.mounts))
			}
		})
	}
}
