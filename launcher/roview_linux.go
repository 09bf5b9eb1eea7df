//go:build linux

package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// outermost drops every directory that lies below another one in dirs and
// sorts the rest: a recursive clone of the outer one already carries the
// inner one with its mounts.
func outermost(dirs []string) []string {
	sorted := append([]string(nil), dirs...)
	sort.Slice(sorted, func(i, j int) bool {
		return depth(sorted[i]) < depth(sorted[j]) || (depth(sorted[i]) == depth(sorted[j]) && sorted[i] < sorted[j])
	})
	var out []string
	for _, d := range sorted {
		d = filepath.Clean(d)
		if belowAny(d, out) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// applyReadOnlyView makes every mount of the namespace read-only except
// the writable directories, which keep the attributes they had (a mount
// the host made read-only stays so). Each writable directory's mount tree
// is cloned before anything changes, every mount is then set read-only,
// and the clones are put back on top of their directories. Device nodes
// (/dev/null, terminals, /dev/pts) keep working on a read-only mount: the
// kernel does not take write access to a mount for them.
//
// Write, create, unlink, chmod, chown and utimes outside the writable
// directories then fail with EROFS at the VFS, before any LSM hook: they
// are refused whatever Landlock covers, and not audited (the kernel audits
// LSM refusals, not EROFS).
func applyReadOnlyView(writable []string) error {
	type clone struct {
		path string
		tree int
	}
	var clones []clone
	defer func() {
		for _, c := range clones {
			unix.Close(c.tree)
		}
	}()
	for _, d := range outermost(writable) {
		fd, err := openNoSymlinks(d)
		if err != nil {
			if os.IsNotExist(err) {
				continue // vanished since the plan: nothing to keep writable
			}
			return fmt.Errorf("mount namespace: read-only view: %w", err)
		}
		tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("mount namespace: read-only view: clone the mounts at %s: %w", d, err)
		}
		clones = append(clones, clone{d, tree})
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("mount namespace: read-only view: make every mount read-only: %w", err)
	}
	// Each target is opened again: the clone goes on top of whatever is
	// mounted there now.
	for _, c := range clones {
		fd, err := openNoSymlinks(c.path)
		if err != nil {
			return fmt.Errorf("mount namespace: read-only view: %w", err)
		}
		err = unix.MoveMount(c.tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("mount namespace: read-only view: keep %s writable: %w", c.path, err)
		}
	}
	return nil
}

// belowAny reports whether p is one of roots or lies below one of them.
func belowAny(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || r == "/" || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}
