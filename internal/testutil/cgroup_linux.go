//go:build linux

package testutil

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Cgroup2Root returns the cgroup v2 mount point from /proc/self/mountinfo
// (never assumed: hybrid hosts mount it at /sys/fs/cgroup/unified).
func Cgroup2Root() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		// mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		line := scanner.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		preFields, postFields := strings.Fields(pre), strings.Fields(post)
		if len(preFields) > 4 && len(postFields) > 0 && postFields[0] == "cgroup2" {
			return unescapeMountPath(preFields[4]), nil
		}
	}
	if err := scanner.Err(); err != nil {
		return "", fmt.Errorf("read mount table: %w", err)
	}
	return "", fmt.Errorf("no cgroup2 mount in /proc/self/mountinfo")
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for space etc.).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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
