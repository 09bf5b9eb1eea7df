//go:build linux

package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
)

// Cgroup2Root returns the cgroup v2 mount point from /proc/self/mountinfo
// (never assumed: hybrid hosts mount it at /sys/fs/cgroup/unified).
func Cgroup2Root() (string, error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return "", fmt.Errorf("read mount table: %w", err)
	}
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			return m.Point, nil
		}
	}
	return "", fmt.Errorf("no cgroup2 mount in /proc/self/mountinfo")
}

// Cgroup is a throwaway cgroup v2 group removed at the end of the test.
type Cgroup struct {
	Dir string // absolute path in cgroupfs
	ID  uint64 // cgroup id, as bpf_get_current_cgroup_id() reports it
}

// NewCgroup creates an empty cgroup v2 group below the cgroup2 root. It
// skips loudly when cgroup2 is missing (fails inside the VM).
func NewCgroup(tb testing.TB) Cgroup {
	tb.Helper()
	RequireRoot(tb)
	root, err := Cgroup2Root()
	if err != nil {
		SkipUnlessVM(tb, "cgroup v2 unavailable: %v", err)
	}
	dir, err := os.MkdirTemp(root, "oxs-test-")
	if err != nil {
		tb.Fatalf("create test cgroup: %v", err)
	}
	tb.Cleanup(func() {
		// rmdir fails while processes remain; the tests wait for theirs.
		if err := os.Remove(dir); err != nil {
			tb.Errorf("remove test cgroup: %v", err)
		}
	})
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		tb.Fatalf("stat test cgroup: %v", err)
	}
	return Cgroup{Dir: filepath.Clean(dir), ID: st.Ino}
}
