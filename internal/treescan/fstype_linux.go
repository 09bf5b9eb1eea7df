//go:build linux

package treescan

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ctimeKept reports whether the kernel itself sets the directory ctimes
// of a filesystem of this type on every change of their entries: local
// filesystems and memory ones. On a FUSE or network filesystem the ctime
// is what the server or daemon reports (a constant, the mtime, a value
// cached before another client's change), so an unchanged ctime would
// not prove unchanged entries. An overlay counts: a change through it
// copies the directory up, and the upper directory's ctime is the
// kernel's (a change to a lower layer under a mounted overlay is one the
// kernel does not define). A root on any other filesystem is scanned in
// full on every start.
func ctimeKept(fsType uint32) bool {
	switch fsType {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC,
		unix.BCACHEFS_SUPER_MAGIC, zfsSuperMagic, unix.TMPFS_MAGIC, unix.RAMFS_MAGIC, unix.OVERLAYFS_SUPER_MAGIC:
		return true
	}
	return false
}

// zfsSuperMagic is OpenZFS's (not in x/sys).
const zfsSuperMagic = 0x2fc12fc1

// ctimeUntrusted says why root's ctimes cannot vouch for its directories
// ("" when they can).
func ctimeUntrusted(root string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return fmt.Sprintf("filesystem of %s: %v", root, err)
	}
	if t := uint32(st.Type); !ctimeKept(t) {
		return fmt.Sprintf("%s is on a filesystem (type %#x) whose directory ctimes the kernel does not keep itself", root, t)
	}
	return ""
}
