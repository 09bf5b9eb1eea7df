//go:build linux

package testutil

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// LandlockAudited says whether this kernel writes Landlock's refusals to
// its audit feed, probed without the code under test: CONFIG_AUDIT (a
// loginuid file) and Landlock ABI 7, the first whose refusals are audited
// (the raw syscall). Without, why says why not.
func LandlockAudited() (why string, ok bool) {
	if _, err := os.Stat("/proc/self/loginuid"); err != nil {
		return "kernel built without CONFIG_AUDIT: Landlock's refusals are not audited", false
	}
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 || v < 7 {
		return fmt.Sprintf("Landlock ABI %d (%v) < 7: its refusals are not audited", v, errno), false
	}
	return "", true
}
