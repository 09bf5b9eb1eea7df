//go:build unix

package testutil

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReportErrnoName is ReportErrno for ops whose output a shell script in a
// session reads: "OK", the errno's name ("EACCES"), or "ERROR" and the
// error for one without an errno. It always returns 0, so a script can
// compare the word whatever the outcome.
func ReportErrnoName(err error) int {
	var errno syscall.Errno
	switch {
	case err == nil:
		fmt.Println("OK")
	case errors.As(err, &errno):
		fmt.Println(unix.ErrnoName(errno))
	default:
		fmt.Println("ERROR", err)
	}
	return 0
}
