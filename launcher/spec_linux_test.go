//go:build linux

package launcher

import (
	"strconv"
	"strings"
	"testing"
)

// TestReadSpec: a spec from another build (another version, or a field
// this launcher does not know) is refused, not half read.
func TestReadSpec(t *testing.T) {
	thisVersion := strconv.Itoa(SpecVersion)
	for _, tc := range []struct {
		name, spec, wantErr string
	}{
		{"this version", `{"version":` + thisVersion + `,"path":"/bin/true","argv":["true"],"mounts":{"read_only_view":true}}`, ""},
		{"no version", `{"path":"/bin/true"}`, "launch spec version 0"},
		{"another version", `{"version":1,"path":"/bin/true"}`, "launch spec version 1"},
		{"unknown field", `{"version":` + thisVersion + `,"path":"/bin/true","mounts":{"read_only_view":true,"new_layer":true}}`, `unknown field "new_layer"`},
		{"not JSON", `version=1`, "decode launch spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := readSpec(strings.NewReader(tc.spec))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("readSpec: %v", err)
			case tc.wantErr == "":
				if spec.Path != "/bin/true" || !spec.Mounts.ReadOnlyView {
					t.Errorf("readSpec = %+v, want the path and the read-only view", spec)
				}
			case err == nil || !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("readSpec: %v, want an error mentioning %q", err, tc.wantErr)
			}
		})
	}
}
