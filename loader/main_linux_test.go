//go:build linux

package loader_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a tiny child process that performs
// one syscall and prints its errno (0 for success), so tests can run the
// syscall from inside a cgroup without depending on external tools.
const helperEnv = "OXS_LOADER_TEST_HELPER_MKDIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		err := unix.Mkdir(dir, 0o755)
		var errno unix.Errno
		switch {
		case err == nil:
			fmt.Println(0)
		case errors.As(err, &errno):
			fmt.Println(int(errno))
		default:
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
