//go:build !linux

package vmtest

import (
	"fmt"
	"os"
)

// GuestMain is the Linux guest's PID 1; other systems cannot run it.
func GuestMain(string) {
	fmt.Fprintln(os.Stderr, "vmtest guest: not supported on this OS")
	os.Exit(1)
}
