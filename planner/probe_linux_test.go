//go:build linux

package planner

import (
	"testing"

	"github.com/openoxide/oxsupervise/cgroup"
)

// ProbeIn checks a cgroup2 mount it is given instead of looking for one:
// the real mount passes as Probe's search does, anything else is refused.
func TestProbeInChecksTheGivenMount(t *testing.T) {
	mount, err := cgroup.Cgroup2Mount()
	if err != nil {
		t.Fatalf("this test needs a cgroup2 mount: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  cgroup.Config
		ok   bool
	}{
		{"searched", cgroup.Config{}, true},
		{"given", cgroup.Config{Mount: mount}, true},
		{"not cgroup2", cgroup.Config{Mount: t.TempDir()}, false},
		{"missing", cgroup.Config{Mount: "/nonexistent/cgroup"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ProbeIn(tc.cfg, nil).Cgroup2
			if (got == nil) != tc.ok {
				t.Errorf("ProbeIn(%+v).Cgroup2 = %v, want ok=%v", tc.cfg, got, tc.ok)
			}
		})
	}
	if Probe(nil).Cgroup2 != nil {
		t.Errorf("Probe found no cgroup2 mount where %s is one", mount)
	}
}
