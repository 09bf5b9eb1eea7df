//go:build linux

package selftest

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// TestDeliberateFailure fails on purpose when the runner asks for it; see
// vmtest.SelfCheckJob.
func TestDeliberateFailure(t *testing.T) {
	if os.Getenv("OXS_VMTEST_SELF_CHECK") != "fail" {
		t.Skip("runs only as the vmtest runner's must-fail self-check (OXS_VMTEST_SELF_CHECK=fail)")
	}
	t.Fatal("deliberate failure: the vmtest runner must report this job as failed")
}

// mounts maps mount point to filesystem type from /proc/self/mountinfo.
func mounts(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		pre, post, ok := strings.Cut(scanner.Text(), " - ")
		if !ok {
			continue
		}
		m[strings.Fields(pre)[4]] = strings.Fields(post)[0]
	}
	return m
}

func TestGuestEnvironment(t *testing.T) {
	if !testutil.InVM() {
		t.Skip("checks the kernel-test VM's setup; runs only there (make vmtest)")
	}
	m := mounts(t)
	for _, tt := range []struct{ dir, fstype string }{
		{"/", "overlay"},
		{"/proc", "proc"},
		{"/sys", "sysfs"},
		{"/sys/fs/cgroup", "cgroup2"},
		{"/sys/fs/bpf", "bpf"},
		{"/sys/kernel/security", "securityfs"},
		{"/sys/kernel/tracing", "tracefs"},
		{"/tmp", "tmpfs"},
	} {
		if got := m[tt.dir]; got != tt.fstype {
			t.Errorf("%s is mounted as %q, want %q", tt.dir, got, tt.fstype)
		}
	}
	if got := os.Getenv("TMPDIR"); got != "/tmp" {
		t.Errorf("TMPDIR = %q, want /tmp (a guest tmpfs, not 9p)", got)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(t.TempDir(), &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Errorf("t.TempDir() is not on tmpfs: statfs type %#x, err %v", st.Type, err)
	}
	if os.Getppid() != 1 {
		t.Errorf("test binary's parent is pid %d, want the guest PID 1", os.Getppid())
	}
	lsms, err := os.ReadFile("/sys/kernel/security/lsm")
	if err != nil || !slices.Contains(strings.Split(strings.TrimSpace(string(lsms)), ","), "bpf") {
		t.Errorf("bpf missing from the active LSMs %q (err %v)", lsms, err)
	}
}

// TestGuestIsNotAChroot guards the reason the guest uses switch_root: in a
// chroot the kernel refuses unshare(CLONE_NEWUSER), which would make every
// namespace-escape test pass for the wrong reason.
func TestGuestIsNotAChroot(t *testing.T) {
	if !testutil.InVM() {
		t.Skip("checks the kernel-test VM's setup; runs only there (make vmtest)")
	}
	// A child does the unshare so the test process keeps its namespaces.
	out, err := exec.Command("unshare", "-Ur", "id", "-u").CombinedOutput()
	if err != nil {
		t.Fatalf("unshare -Ur: %v: %s (user namespaces refused: chroot?)", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "0" {
		t.Fatalf("uid inside the new user namespace = %q, want 0", got)
	}
}
