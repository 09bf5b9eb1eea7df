//go:build linux

package launcher

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// DevShm is where a session's own shared memory is mounted (MountPlan
// .PrivateShm).
const DevShm = "/dev/shm"

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
	target, err := openNoSymlinks(DevShm)
	if err != nil {
		return fmt.Errorf("mount namespace: private /dev/shm: %w", err)
	}
	defer unix.Close(target)
	if err := unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount namespace: private /dev/shm: %w", err)
	}
	return nil
}
