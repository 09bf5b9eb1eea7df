//go:build linux

package fsguard_test

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// mountOf returns where a filesystem of type fstype is mounted, or "".
func mountOf(t *testing.T, fstype string) string {
	t.Helper()
	mounts, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.FSType == fstype {
			return m.Point
		}
	}
	return ""
}

// The kernel's own interfaces are outside every writable root: a session
// cannot leave its cgroup through the parent's cgroup.procs, pin objects
// in bpffs, or retune the kernel through /proc/sys and /sys.
func TestKernelInterfacesNotWritable(t *testing.T) {
	g := loadGuard(t)
	ev := collectEvents(t, g)
	ws := realTempDir(t)
	cg := testutil.NewCgroup(t)
	if err := g.AddSession(cg.ID, workspacePolicy(t, ws, nil, nil)); err != nil {
		t.Fatalf("AddSession: %v", err)
	}
	t.Cleanup(func() { g.RemoveSession(cg.ID) })

	// Writing "0" to cgroup.procs moves the writer itself.
	parentProcs := filepath.Join(filepath.Dir(cg.Dir), "cgroup.procs")
	tests := []struct {
		name, op string
		args     []string
		event    fsguard.Op
		fstype   string // skip when no such filesystem is mounted
	}{
		{"join the parent cgroup", "write-file", []string{parentProcs, "0"}, fsguard.OpOpenWrite, ""},
		{"own cgroup's interface files", "write", []string{filepath.Join(cg.Dir, "cgroup.procs"), "0"}, fsguard.OpOpenWrite, ""},
		{"sysctl", "write", []string{"/proc/sys/kernel/domainname", "evil"}, fsguard.OpOpenWrite, ""},
		{"sysfs", "write", []string{"/sys/kernel/mm/transparent_hugepage/enabled", "never"}, fsguard.OpOpenWrite, ""},
		{"pin in bpffs", "mkdir", nil, fsguard.OpMkdir, "bpf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.fstype != "" {
				mnt := mountOf(t, tt.fstype)
				if mnt == "" {
					testutil.SkipUnlessVM(t, "no %s filesystem mounted", tt.fstype)
				}
				args = []string{filepath.Join(mnt, "oxs-test-"+strconv.Itoa(os.Getpid()))}
				t.Cleanup(func() { os.Remove(args[0]) })
			}
			if _, err := os.Stat(args[0]); err != nil && tt.fstype == "" {
				t.Skipf("SKIPPED, NOT PASSED: %s does not exist on this kernel: %v", args[0], err)
			}
			if got := inCgroup(t, &cg, tt.op, args...); got != syscall.Errno(unix.EACCES) {
				t.Fatalf("%s %v: errno %v, want EACCES", tt.op, args, got)
			}
			e := ev.waitFor(t, cg.ID, tt.event, args[0])
			if e.Kind != fsguard.KindOutside {
				t.Fatalf("event %+v: want kind %v", e, fsguard.KindOutside)
			}
			if tt.fstype != "" {
				if _, err := os.Stat(args[0]); err == nil {
					t.Fatalf("%s exists after the refused mkdir", args[0])
				}
			}
		})
	}
}
