//go:build unix

package policy

import (
	"io/fs"
	"syscall"
)

// fileID returns the (dev, ino) identity kernel-side matching keys on.
func fileID(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino) //nolint:unconvert // Dev is int32 on some unix ports
	}
	return 0, 0
}
