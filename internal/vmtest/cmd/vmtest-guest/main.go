// Command vmtest-guest is PID 1 inside the kernel-test VM (see
// internal/vmtest). The initramfs switch_roots into the host root overlay
// and execs it with the path of the job file.
package main

import (
	"fmt"
	"os"

	"github.com/openoxide/oxsupervise/internal/vmtest"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" {
		fmt.Fprintln(os.Stderr, "usage: vmtest-guest JOBFILE (PID 1 of the test VM, started by internal/vmtest)")
		os.Exit(2)
	}
	vmtest.GuestMain(os.Args[1])
}
