//go:build !linux

package main

import (
	"fmt"
	"io"
)

// execDaemon fails: the daemon is Linux only.
func execDaemon(_ []string, errOut io.Writer) int {
	fmt.Fprintln(errOut, "oxsupervise daemon: the oxsupervise daemon is not supported on this OS")
	return exitFail
}
