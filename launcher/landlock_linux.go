//go:build linux

package launcher

import (
	"errors"
	"fmt"
	"sort"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LandlockFileRights are the only rights a Landlock rule on a
// non-directory may carry: Prepare narrows a rule to them when its path
// is no directory, and package landlock plans the rules of files with them.
const LandlockFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
	unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
	unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

// Prepared is a ruleset loaded into the kernel, ready to be enforced.
type Prepared struct {
	fd    int
	flags uint32
}

// rulesetAttr is struct landlock_ruleset_attr up to ABI 7.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// pathBeneathAttr is the packed struct landlock_path_beneath_attr.
type pathBeneathAttr struct {
	allowedAccess uint64
	parentFd      int32
}

// Prepare creates the kernel ruleset and adds every rule. A rule never
// follows a symlink: one whose last component is a symlink is skipped,
// one with a symlink earlier in its path is an error (landlock.Plan only produces
// resolved paths, so a symlink there was swapped in since, and following
// it could grant write access to wherever it points). A path that vanished
// since it was planned is skipped (nothing is granted for it); any other failure is
// an error. The caller owns the result and must Close it.
func (r *Ruleset) Prepare() (*Prepared, error) {
	if r.Empty() {
		return nil, nil
	}
	attr := rulesetAttr{handledAccessFS: r.HandledFS, scoped: r.Scoped}
	size := unsafe.Sizeof(attr)
	if r.ABI < 6 {
		size = 16
	}
	if r.ABI < 4 {
		size = 8
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return nil, fmt.Errorf("landlock: create ruleset: %w", errno)
	}
	p := &Prepared{fd: int(fd), flags: r.RestrictFlags}
	rules := append([]Rule(nil), r.Rules...)
	sort.SliceStable(rules, func(i, j int) bool { return rules[i].Path < rules[j].Path })
	for _, rule := range rules {
		if err := p.addRule(rule); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

func (p *Prepared) addRule(rule Rule) error {
	if rule.Access == 0 {
		return nil
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, rule.Path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	// With O_PATH|O_NOFOLLOW a symlink as the last component opens as
	// itself (skipped below): ELOOP means one earlier in the path.
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("landlock: %s: a path component is a symlink; refusing to follow it", rule.Path)
	}
	if err != nil {
		return fmt.Errorf("landlock: open %s: %w", rule.Path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("landlock: stat %s: %w", rule.Path, err)
	}
	access := rule.Access
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return nil
	default:
		access &= LandlockFileRights
	}
	attr := pathBeneathAttr{allowedAccess: access, parentFd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(p.fd), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock: add rule %s (access %#x): %w", rule.Path, access, errno)
	}
	return nil
}

// RestrictSelf sets no_new_privs and enforces the ruleset on the calling
// thread only (landlock_restrict_self is per thread): the caller must hold
// runtime.LockOSThread and exec from the same thread.
func (p *Prepared) RestrictSelf() error {
	if p == nil {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("landlock: set no_new_privs: %w", err)
	}
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(p.fd), uintptr(p.flags), 0)
	if errno != 0 {
		return fmt.Errorf("landlock: restrict self (flags %#x): %w", p.flags, errno)
	}
	return nil
}

// Close releases the ruleset fd.
func (p *Prepared) Close() error {
	if p == nil || p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	return err
}
