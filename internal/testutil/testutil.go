// Package testutil holds helpers shared by oxsupervise's tests: knowing
// whether a test runs inside the kernel-test VM, skipping loudly (or failing
// when the VM promises the feature), throwaway cgroup v2 groups, and helper
// processes: the test binary started again to run one op (subprocess.go).
package testutil

import (
	"fmt"
	"os"
	"testing"
)

// VMTestEnv is set to "1" by internal/vmtest in the guest. Tests use it to
// turn "cannot run on this kernel" from a skip into a failure: the VM kernel
// is built to support every feature under test.
const VMTestEnv = "OXSUPERVISE_VMTEST"

// InVM reports whether the test runs inside the kernel-test VM.
func InVM() bool { return os.Getenv(VMTestEnv) == "1" }

// SkipUnlessVM skips the test with a loud reason when the kernel lacks a
// feature, except inside the VM, where the same condition fails the test.
func SkipUnlessVM(tb testing.TB, format string, args ...any) {
	tb.Helper()
	reason := fmt.Sprintf(format, args...)
	if InVM() {
		tb.Fatalf("%s (inside the test VM, where this must work)", reason)
	}
	tb.Skipf("SKIPPED, NOT PASSED: %s (runs in the test VM: make vmtest)", reason)
}

// RequireRoot skips (or fails inside the VM) when the test is not root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		SkipUnlessVM(tb, "test needs root, running as uid %d", os.Geteuid())
	}
}
