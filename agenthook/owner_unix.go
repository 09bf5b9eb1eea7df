//go:build unix

package agenthook

import (
	"io/fs"
	"syscall"
)

// fileOwner returns the owner of an existing file, so a replacement keeps
// it (a root `agent setup --managed` must not leave a user's file root's).
func fileOwner(fi fs.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}
