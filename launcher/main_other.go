//go:build !linux

package launcher

import (
	"fmt"
	"os"
)

// Main is the launcher (Linux only): elsewhere it says so and fails.
func Main() int {
	fmt.Fprintln(os.Stderr, "oxsupervise: the session launcher runs on Linux only")
	return 125
}
