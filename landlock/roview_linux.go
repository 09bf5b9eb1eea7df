//go:build linux

package landlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
)

// WritableDirs are the directories a session may write below: the policy's
// existing writable roots and, in workspace-write mode, /dev/shm (POSIX
// shared memory and semaphores, which Python's multiprocessing locks use).
// Missing roots are returned apart, for the caller's warning. Landlock
// grants writes below exactly these, and the read-only view keeps exactly
// these writable: one list for both layers.
func WritableDirs(c *policy.Compiled) (dirs, missing []string) {
	if !c.FilesystemRules {
		return nil, nil
	}
	for _, a := range c.WritableRoots {
		if !a.Exists {
			missing = append(missing, a.Path)
			continue
		}
		dirs = append(dirs, a.Path)
	}
	if c.Mode == policy.ModeWorkspaceWrite {
		if fi, err := os.Lstat(devShm); err == nil && fi.IsDir() && !slices.Contains(dirs, devShm) {
			dirs = append(dirs, devShm)
		}
	}
	return dirs, missing
}

// viewWritable is what stays writable at the mount level in the read-only
// view: WritableDirs, and the directory holding each writable root that is
// a file. Such a file's writers create a temporary file beside it and
// rename it over the file (Claude Code's ~/.claude.json), and fall back to
// writing it in place only when the kernel refuses the temporary file
// with EACCES or EPERM, not with EROFS: in that directory Landlock stays
// the refusing layer (EACCES, audited) for every create, write, rename and
// unlink but the file's own write. What the view no longer stops there is
// a metadata change (chmod, utimes) of another entry in that directory;
// the BPF-LSM path refuses those too.
func viewWritable(c *policy.Compiled) []string {
	dirs, _ := WritableDirs(c)
	out := append([]string(nil), dirs...)
	for _, a := range c.WritableRoots {
		if a.Exists && !a.Dir {
			out = append(out, filepath.Dir(a.Path))
		}
	}
	return out
}

const devShm = "/dev/shm"

// privateShm reports whether the session gets a /dev/shm of its own: in
// every mode with filesystem rules, unless the policy lists /dev/shm as a
// writable root (sharing the host's shared memory on purpose). Through
// the host's /dev/shm a session could otherwise reach the POSIX shared
// memory and semaphores of the user's other programs.
func privateShm(c *policy.Compiled) bool {
	if !c.FilesystemRules {
		return false
	}
	for _, a := range c.WritableRoots {
		if a.Path == devShm {
			return false
		}
	}
	fi, err := os.Lstat(devShm)
	return err == nil && fi.IsDir()
}

// PrivateShmWritable reports whether c's session gets a /dev/shm of its
// own that it may write (PlanMounts' PrivateShm without ShmReadOnly).
func PrivateShmWritable(c *policy.Compiled) bool {
	return c.Mode != policy.ModeFullAccess && privateShm(c) && slices.Contains(viewWritable(c), devShm)
}

// NewPrivateShm creates the tmpfs of a session's own /dev/shm (sticky,
// world writable as /dev/shm is; read-only when the session may not write
// it) as a detached mount, mounted nowhere yet: the launcher moves it onto
// /dev/shm inside its mount namespace (MountPlan.ShmFD). The supervisor
// creates it, so that it knows the filesystem before the command runs:
// the BPF-LSM rules anchor writes on its root, which lies in no path of
// the policy (package fsguard, session.SessionInfo.PrivateShm).
func NewPrivateShm(readOnly bool) (*os.File, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("private /dev/shm: fsopen tmpfs: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "mode", "1777"); err != nil {
		return nil, fmt.Errorf("private /dev/shm: %w", err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return nil, fmt.Errorf("private /dev/shm: create tmpfs: %w", err)
	}
	attr := unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	if readOnly {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	tree, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attr)
	if err != nil {
		return nil, fmt.Errorf("private /dev/shm: fsmount: %w", err)
	}
	return os.NewFile(uintptr(tree), "private-shm"), nil
}

// mountPrivateShm moves the detached tmpfs tree (NewPrivateShm, an fd of
// this process) onto /dev/shm.
func mountPrivateShm(tree int) error {
	if tree <= 0 {
		return errors.New("mount namespace: private /dev/shm: no tmpfs given (MountPlan.ShmFD)")
	}
	target, err := openNoSymlinks(devShm)
	if err != nil {
		return fmt.Errorf("mount namespace: private /dev/shm: %w", err)
	}
	defer unix.Close(target)
	if err := unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount namespace: private /dev/shm: %w", err)
	}
	return nil
}

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
		if insideAny(d, out) {
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
