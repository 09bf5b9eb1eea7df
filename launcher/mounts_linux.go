//go:build linux

package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/shquote"
)

// Apply changes the calling process's mount namespace, which must be a
// fresh one (CLONE_NEWNS): it would otherwise change the host's mounts.
func (m MountPlan) Apply() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("mount namespace: make mounts private: %w", err)
	}
	if m.ReadOnlyView {
		// First: the binds below are made from the view, so a pin
		// inside a writable root stays writable and everything else
		// read-only.
		writable := m.Writable
		if m.PrivateShm {
			// Covered by the session's own tmpfs below.
			writable = slices.DeleteFunc(slices.Clone(writable), func(d string) bool { return d == DevShm })
		}
		if err := applyReadOnlyView(writable); err != nil {
			return err
		}
	}
	if m.PrivateShm {
		if err := mountPrivateShm(m.ShmFD); err != nil {
			return err
		}
	}
	type target struct {
		path     string
		readOnly bool
		anchor   *Inode
	}
	var targets []target
	for _, p := range m.Pinned {
		targets = append(targets, target{path: p})
	}
	for i := range m.Protected {
		targets = append(targets, target{path: m.Protected[i].Path, readOnly: true, anchor: &m.Protected[i]})
	}
	// Shallow first: a pin placed after a deeper read-only bind would
	// cover it.
	sort.SliceStable(targets, func(i, j int) bool { return depth(targets[i].path) < depth(targets[j].path) })
	for _, t := range targets {
		if err := bindSelf(t.path, t.readOnly, t.anchor); err != nil {
			return err
		}
	}
	for _, p := range m.Masked {
		if err := mask(p); err != nil {
			return err
		}
	}
	for _, p := range m.ReadOnly {
		if err := bindSelf(p, true, nil); err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return err
		}
	}
	return nil
}

func depth(p string) int { return strings.Count(filepath.Clean(p), "/") }

// openNoSymlinks opens p as O_PATH without following a symlink in any
// component: setup never follows a symlink at a protected name.
func openNoSymlinks(p string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if err == unix.ELOOP {
			return -1, fmt.Errorf("mount namespace: %s: a path component is a symlink; refusing to follow it%s", p, symlinkFix(p))
		}
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// bindSelf binds p onto itself (recursively, with its submounts), read-only
// when readOnly. When anchor is set the inode must still be the one the
// policy resolved, or setup fails closed.
func bindSelf(p string, readOnly bool, anchor *Inode) error {
	fd, err := openNoSymlinks(p)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if anchor != nil {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("mount namespace: stat %s: %w", p, err)
		}
		if anchor.Ino != 0 && (st.Dev != anchor.Dev || st.Ino != anchor.Ino) {
			return fmt.Errorf("mount namespace: protected path %s changed since the policy was compiled (dev:ino %d:%d, expected %d:%d)",
				p, st.Dev, st.Ino, anchor.Dev, anchor.Ino)
		}
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("mount namespace: clone mount at %s: %w", p, err)
	}
	defer unix.Close(tree)
	if readOnly {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			return fmt.Errorf("mount namespace: make %s read-only: %w", p, err)
		}
	}
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount namespace: bind %s onto itself: %w", p, err)
	}
	return nil
}

// mask hides a deny-read anchor: an empty read-only tmpfs over a
// directory, a read-only /dev/null over anything else.
func mask(p string) error {
	fd, err := openNoSymlinks(p)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("mount namespace: stat %s: %w", p, err)
	}
	var tree int
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
		if err != nil {
			return fmt.Errorf("mount namespace: mask %s: fsopen tmpfs: %w", p, err)
		}
		defer unix.Close(fs)
		// Readable and empty: a session without CAP_DAC_OVERRIDE (every
		// session) sees an empty directory, as root did before, instead
		// of one it may not search.
		if err := unix.FsconfigSetString(fs, "mode", "0555"); err != nil {
			return fmt.Errorf("mount namespace: mask %s: %w", p, err)
		}
		if err := unix.FsconfigCreate(fs); err != nil {
			return fmt.Errorf("mount namespace: mask %s: create tmpfs: %w", p, err)
		}
		tree, err = unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOEXEC|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
		if err != nil {
			return fmt.Errorf("mount namespace: mask %s: fsmount: %w", p, err)
		}
	} else {
		tree, err = unix.OpenTree(unix.AT_FDCWD, "/dev/null", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("mount namespace: mask %s: clone /dev/null: %w", p, err)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			unix.Close(tree)
			return fmt.Errorf("mount namespace: mask %s: %w", p, err)
		}
	}
	defer unix.Close(tree)
	if err := unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount namespace: mask %s: %w", p, err)
	}
	return nil
}

// symlinkFix names the first symlink on p and the command that replaces
// it with the entry it points at, for the error a user acts on.
func symlinkFix(p string) string {
	cur := "/"
	for _, comp := range strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/") {
		cur = filepath.Join(cur, comp)
		fi, err := os.Lstat(cur)
		if err != nil {
			return ""
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		target, err := filepath.EvalSymlinks(cur)
		if err != nil {
			return fmt.Sprintf("; %s is a dangling symlink: remove it with: rm %s", cur, shquote.Quote(cur))
		}
		return fmt.Sprintf("; %s is a symlink to %s: replace it with the real entry: rm %s && cp -a %s %s",
			cur, target, shquote.Quote(cur), shquote.Quote(target), shquote.Quote(cur))
	}
	return ""
}
