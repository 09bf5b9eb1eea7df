package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/companion"
)

// execDaemon replaces this process with the daemon program and args. The
// file executed is the one companion.Find checked, by its descriptor. It
// returns only when the program is missing, fails the check or cannot be
// executed, and then says where it looked.
func execDaemon(args []string, errOut io.Writer) int {
	p, err := companion.Find(companion.Daemon)
	if err != nil {
		fmt.Fprintf(errOut, "oxsupervise daemon: %v\n", err)
		return exitFail
	}
	defer p.Close()
	err = unix.Exec(companion.ExecPath(int(p.File.Fd())), append([]string{p.Path}, args...), os.Environ())
	fmt.Fprintf(errOut, "oxsupervise daemon: execute %s: %v\n", p.Path, err)
	return exitFail
}
