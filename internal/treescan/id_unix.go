//go:build unix

package treescan

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
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
	var id dirID
	id.dev, id.ino, id.ctime = idOf(fi)
	return id, nil
}

// idOf is fi's device, inode and ctime (zeros when fi has no Stat_t).
func idOf(fi os.FileInfo) (dev, ino uint64, ctime int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0
	}
	return uint64(st.Dev), st.Ino, ctimeOf(st)
}

// statAt looks up directories below a scan's root relative to a
// descriptor of the root: a remembered directory costs one fstatat of a
// short path and no allocation, the whole price of an unchanged tree.
type statAt struct {
	root string
	fd   int // -1: by full path
}

// openAt opens root, whose lstat identity is id, for statAt; every
// lookup and read of the scan is relative to this descriptor, so they all
// see one tree even if root is renamed meanwhile. A root that is no
// longer the directory id names is an error; when it cannot be opened at
// all, lookups go by full path.
func openAt(root string, id dirID) (statAt, func(), error) {
	fd, err := unix.Open(root, rootOpenFlags|unix.O_NOFOLLOW, 0)
	if err != nil {
		return statAt{root: root, fd: -1}, func() {}, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint64(st.Dev) != id.dev || st.Ino != id.ino {
		unix.Close(fd)
		return statAt{}, nil, fmt.Errorf("replaced while the scan started")
	}
	return statAt{root: root, fd: fd}, func() { unix.Close(fd) }, nil
}

// openDir opens the directory at rel ("" for the root) for reading; a
// symlink there is not followed.
func (a statAt) openDir(rel string) (*os.File, error) {
	path := filepath.Join(a.root, filepath.FromSlash(rel))
	if a.fd < 0 {
		return os.Open(path)
	}
	name := rel
	if name == "" {
		name = "."
	}
	fd, err := unix.Openat(a.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// lstatDir is the identity of the directory at rel (slash-separated,
// below the root); a symlink or a non-directory is an error.
func (a statAt) lstatDir(rel string) (dirID, error) {
	if a.fd < 0 {
		return lstatDir(a.root + "/" + rel)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(a.fd, rel, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return dirID{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return dirID{}, fmt.Errorf("%s/%s is not a directory", a.root, rel)
	}
	return dirID{dev: uint64(st.Dev), ino: st.Ino, ctime: ctimeOfUnix(&st)}, nil
}

// ownedByMe reports whether fi is owned by the uid this thread accesses
// files as (fileUID) and writable by nobody else.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == fileUID() && fi.Mode().Perm()&0o022 == 0
}
