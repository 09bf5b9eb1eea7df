//go:build linux

package loader_test

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// ops are the test binary's helper processes (testutil.RunOp): "mkdir DIR"
// performs one syscall and prints its errno (0 for success), so tests can
// run the syscall from inside a cgroup without depending on external tools.
var ops = map[string]testutil.Op{
	"mkdir": func(args []string) int { return testutil.ReportErrno(unix.Mkdir(args[0], 0o755)) },
}

func TestMain(m *testing.M) {
	testutil.RunOp(ops)
	os.Exit(m.Run())
}
