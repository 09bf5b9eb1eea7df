//go:build linux

package launcher

import (
	"strings"
	"testing"
)

func TestOutermost(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"/a/b", "/a", "/c"}, []string{"/a", "/c"}},
		{[]string{"/ab", "/a"}, []string{"/a", "/ab"}},
		{[]string{"/tmp", "/dev/shm", "/tmp/x/y"}, []string{"/tmp", "/dev/shm"}},
		{nil, nil},
	} {
		if got := outermost(tc.in); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("outermost(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
