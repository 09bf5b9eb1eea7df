//go:build linux

package loader_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader/internal/mkdirdeny"
)

// mkdirIn runs mkdir(dir) in a child process, inside cgroup cg when cg is
// not nil, and returns the child's errno.
func mkdirIn(t *testing.T, cg *testutil.Cgroup, dir string) syscall.Errno {
	t.Helper()
	cmd := testutil.OpCommand("mkdir", dir)
	cmd.Stderr = os.Stderr
	if cg != nil {
		fd, err := unix.Open(cg.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open cgroup %s: %v", cg.Dir, err)
		}
		defer unix.Close(fd)
		// CLONE_INTO_CGROUP: the child never runs a single instruction outside cg.
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mkdir helper: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("mkdir helper printed %q: %v", out, err)
	}
	return syscall.Errno(n)
}

func TestMkdirDenierDeniesOnlyListedCgroup(t *testing.T) {
	if v := independentLSMProbe(t); !v.usable() {
		errno := errnoOf(v.loadErr)
		if errno == 0 {
			errno = errnoOf(v.attachErr)
		}
		testutil.SkipUnlessVM(t, "BPF-LSM unusable on this kernel: errno %s (bpf in LSM list: %v, load: %v, attach: %v)",
			unix.ErrnoName(errno), v.inList, v.loadErr, v.attachErr)
	}
	confined := testutil.NewCgroup(t)
	bystander := testutil.NewCgroup(t)

	denier, err := mkdirdeny.Load()
	if err != nil {
		t.Fatalf("mkdirdeny.Load() = %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			denier.Close()
		}
	})
	if err := denier.DenyCgroup(confined.ID); err != nil {
		t.Fatalf("DenyCgroup(%d) = %v", confined.ID, err)
	}

	work := t.TempDir()
	tests := []struct {
		name    string
		cgroup  *testutil.Cgroup
		wantErr syscall.Errno
	}{
		{"inside the denied cgroup", &confined, unix.EPERM},
		{"in another cgroup", &bystander, 0},
		{"in the test's own cgroup", nil, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(work, "d"+strconv.Itoa(i))
			if got := mkdirIn(t, tt.cgroup, dir); got != tt.wantErr {
				t.Fatalf("mkdir errno = %d (%v), want %d (%v)", got, got, tt.wantErr, tt.wantErr)
			}
			_, statErr := os.Stat(dir)
			if exists := statErr == nil; exists != (tt.wantErr == 0) {
				t.Fatalf("after mkdir: directory exists = %v (stat: %v), want %v", exists, statErr, tt.wantErr == 0)
			}
		})
	}

	// Detaching must lift the rule: nothing may outlive Close.
	if err := denier.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	closed = true
	dir := filepath.Join(work, "after-close")
	if got := mkdirIn(t, &confined, dir); got != 0 {
		t.Fatalf("mkdir in the formerly denied cgroup after Close: errno %d (%v), want success", got, got)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("directory made after Close is missing: %v", err)
	}
}
