//go:build linux

package launcher

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// capabilityByName maps the names policy.Compiled.Capabilities may hold to
// their numbers. A name missing here fails the launch: the launcher never
// guesses at a capability.
var capabilityByName = map[string]uintptr{
	"CAP_CHOWN": unix.CAP_CHOWN, "CAP_DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "CAP_FOWNER": unix.CAP_FOWNER,
	"CAP_FSETID": unix.CAP_FSETID, "CAP_KILL": unix.CAP_KILL, "CAP_SETUID": unix.CAP_SETUID,
	"CAP_SETGID": unix.CAP_SETGID, "CAP_NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE, "CAP_NET_RAW": unix.CAP_NET_RAW,
	"CAP_IPC_LOCK": unix.CAP_IPC_LOCK, "CAP_SYS_NICE": unix.CAP_SYS_NICE, "CAP_SYS_RESOURCE": unix.CAP_SYS_RESOURCE,
	"CAP_AUDIT_WRITE": unix.CAP_AUDIT_WRITE,
}

// capabilityMask turns capability names into a bit mask (bit N is
// capability N), refusing unknown names and CAP_SETPCAP, which the
// launcher itself must give up last.
func capabilityMask(names []string) (uint64, error) {
	var mask uint64
	for _, n := range names {
		c, ok := capabilityByName[n]
		if !ok {
			return 0, fmt.Errorf("capability %q cannot be kept in a session", n)
		}
		mask |= 1 << c
	}
	return mask, nil
}

// dropPrivileges switches this thread to the target user with no
// capabilities but spec.Capabilities, root included: the bounding set
// loses every other one (so exec cannot give root its capabilities back),
// and the effective, permitted, inheritable and ambient sets hold exactly
// the kept ones. The raw, per-thread syscalls are deliberate: the thread
// that execs is the one whose credentials the command gets, and Go's
// all-threads variants fail in binaries that use cgo.
func dropPrivileges(spec *Spec) error {
	keep, err := capabilityMask(spec.Capabilities)
	if err != nil {
		return err
	}
	if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("clear ambient capabilities: %w", errno)
	}
	// CAP_SETPCAP, needed to drop, is never kept: drop it last.
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		if c == unix.CAP_SETPCAP || keep&(1<<c) != 0 {
			continue
		}
		// EINVAL: a capability this kernel does not know.
		if _, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0); errno != 0 && errno != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, errno)
		}
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, unix.CAP_SETPCAP, 0); errno != 0 {
		return fmt.Errorf("drop CAP_SETPCAP from the bounding set: %w", errno)
	}
	if spec.UID != 0 || spec.GID != 0 {
		if keep != 0 && spec.UID != 0 {
			// Otherwise setresuid empties the permitted set, and the
			// kept capabilities with it.
			if _, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 1, 0); errno != 0 {
				return fmt.Errorf("keep capabilities across setresuid: %w", errno)
			}
		}
		if err := switchUser(spec); err != nil {
			return err
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	lo, hi := uint32(keep), uint32(keep>>32)
	data := [2]unix.CapUserData{
		{Effective: lo, Permitted: lo, Inheritable: lo},
		{Effective: hi, Permitted: hi, Inheritable: hi},
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("set capabilities to %v: %w", spec.Capabilities, err)
	}
	if spec.UID != 0 {
		// A non-root command keeps them across exec only as ambient
		// capabilities (root gets its bounding set back at exec).
		for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
			if keep&(1<<c) == 0 {
				continue
			}
			if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, c, 0, 0, 0); errno != 0 {
				return fmt.Errorf("raise ambient capability %d: %w", c, errno)
			}
		}
	}
	return nil
}

// switchUser sets the supplementary groups, gid and uid of this thread.
func switchUser(spec *Spec) error {
	groups := make([]uint32, len(spec.Groups))
	for i, g := range spec.Groups {
		groups[i] = uint32(g)
	}
	var gp uintptr
	if len(groups) > 0 {
		gp = uintptr(unsafe.Pointer(&groups[0]))
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), gp, 0); errno != 0 {
		return fmt.Errorf("setgroups %v: %w", spec.Groups, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(spec.GID), uintptr(spec.GID), uintptr(spec.GID)); errno != 0 {
		return fmt.Errorf("setresgid %d: %w", spec.GID, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(spec.UID), uintptr(spec.UID), uintptr(spec.UID)); errno != 0 {
		return fmt.Errorf("setresuid %d: %w", spec.UID, errno)
	}
	return nil
}
