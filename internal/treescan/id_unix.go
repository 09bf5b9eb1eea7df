//go:build unix

package treescan

import (
	"fmt"
	"os"
	"syscall"
)

// dirID is a directory's identity and change time.
type dirID struct {
	dev, ino uint64
	ctime    int64 // ns; 0 when unknown (never remembered)
}

// lstatDir returns the identity of the directory at path; a symlink or a
// non-directory is an error.
func lstatDir(path string) (dirID, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return dirID{}, err
	}
	if !fi.IsDir() {
		return dirID{}, fmt.Errorf("%s is not a directory", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirID{}, nil
	}
	return dirID{dev: uint64(st.Dev), ino: st.Ino, ctime: ctimeOf(st)}, nil
}

// ownedByMe reports whether fi is owned by the uid this thread accesses
// files as (fileUID) and writable by nobody else.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == fileUID() && fi.Mode().Perm()&0o022 == 0
}
