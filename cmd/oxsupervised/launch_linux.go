package main

import (
	"unsafe"

	"golang.org/x/sys/unix"

	// Without the launcher program beside it (internal/companion), the
	// daemon's sessions are launched by this binary re-executed with the
	// launcher's verb; launchfirst intercepts it during initialization.
	_ "github.com/openoxide/oxsupervise/internal/launchfirst"
)

// nameProcess names the process oxsupervised: `oxsupervise daemon`
// executes it by descriptor (/proc/self/fd/N), which would otherwise make
// its name, the one ps, pgrep and the journal show, that number.
func nameProcess() {
	name, _ := unix.BytePtrFromString("oxsupervised")
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0)
}
