//go:build linux

package landlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
)

// Access rights, by the ABI that introduced them (include/uapi/linux/landlock.h).
const (
	rightsABI1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	rightsABI2 = rightsABI1 | unix.LANDLOCK_ACCESS_FS_REFER
	rightsABI3 = rightsABI2 | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	rightsABI5 = rightsABI3 | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	// fileRights are the only rights a rule on a non-directory may carry.
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	readRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR
	// Device nodes are never created inside a session, not even in
	// writable roots.
	writeRights  = rightsABI5 &^ (unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK)
	deviceRights = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	scopeABI6 = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
)

// MinABI is the oldest Landlock ABI this layer accepts for filesystem rules:
// before ABI 3 truncate(2) is not controlled, so a file outside the writable
// roots could be emptied. Refusing is the fail-closed answer.
const MinABI = 3

// AuditABI is the first Landlock ABI whose refusals the kernel audits
// (Linux 6.15); before it a Landlock refusal is invisible to the
// supervisor.
const AuditABI = 7

// devices stay usable in every mode with filesystem rules: shells and
// tools write to /dev/null and talk to their terminal.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// Rule grants Access below (or on) Path.
type Rule struct {
	Path   string `json:"path"`
	Access uint64 `json:"access"`
}

// Ruleset is the Landlock ruleset a session needs. It is plain data so the
// supervisor can compute it before starting the launcher and the launcher
// can enforce it.
type Ruleset struct {
	ABI int `json:"abi"`
	// HandledFS is zero when the policy has no filesystem rules.
	HandledFS uint64 `json:"handled_fs"`
	Scoped    uint64 `json:"scoped"`
	Rules     []Rule `json:"rules"`
	// RestrictFlags are passed to landlock_restrict_self.
	RestrictFlags uint32 `json:"restrict_flags"`
	// Masked are deny-read anchors inside writable roots. Landlock cannot
	// take read access away below a granted root, so the mount layer hides
	// them instead (see MountPlan).
	Masked []string `json:"masked,omitempty"`
}

// Empty reports whether there is nothing to enforce.
func (r *Ruleset) Empty() bool { return r == nil || (r.HandledFS == 0 && r.Scoped == 0) }

// ABI reports the Landlock ABI version of the running kernel; an error means
// Landlock is unusable (not built in, or not in the lsm= list).
func ABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		switch errno {
		case unix.ENOSYS:
			return 0, fmt.Errorf("landlock: kernel built without Landlock (ENOSYS)")
		case unix.EOPNOTSUPP:
			return 0, fmt.Errorf("landlock: disabled at boot, add landlock to lsm= (EOPNOTSUPP)")
		}
		return 0, fmt.Errorf("landlock: probe ABI: %w", errno)
	}
	return int(v), nil
}

func handledFS(abi int) uint64 {
	switch {
	case abi >= 5:
		return rightsABI5
	case abi >= 3:
		return rightsABI3
	case abi == 2:
		return rightsABI2
	default:
		return rightsABI1
	}
}

// Plan computes the ruleset that enforces c on a kernel with Landlock ABI
// abi. It reads directories (to split reads around deny-read anchors) but
// changes nothing. The returned warnings must be shown to the user.
func Plan(c *policy.Compiled, abi int) (*Ruleset, []string, error) {
	r := &Ruleset{ABI: abi}
	var warnings []string
	if c.Mode == policy.ModeFullAccess {
		return r, nil, nil
	}
	if abi >= 6 {
		r.Scoped = scopeABI6
	} else {
		warnings = append(warnings, fmt.Sprintf("landlock ABI %d: no signal or abstract-unix-socket scoping (needs ABI 6, Linux 6.12)", abi))
	}
	if abi >= AuditABI {
		// Without this flag the kernel logs denials only until the
		// launcher execs, i.e. never for the command itself.
		r.RestrictFlags = unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
	}
	if !c.FilesystemRules {
		// external-sandbox: deny-read is left to the mount layer
		// (PlanMounts).
		return r, warnings, nil
	}
	if abi < MinABI {
		return nil, nil, fmt.Errorf("landlock ABI %d cannot control truncate(2) (need ABI %d, Linux 6.2)", abi, MinABI)
	}
	handled := handledFS(abi)
	r.HandledFS = handled

	writable, missing := WritableDirs(c)
	for _, p := range missing {
		warnings = append(warnings, fmt.Sprintf("writable root %s does not exist: not granted", p))
	}

	var denied []string
	for _, a := range c.DenyRead {
		if insideAny(a.Path, writable) {
			if a.Exists {
				r.Masked = append(r.Masked, a.Path)
			}
			continue
		}
		denied = append(denied, a.Path)
	}

	readRoots := []string{"/"}
	if c.ReadAccess == policy.ReadAccessRestricted {
		readRoots = nil
		for _, a := range c.ReadableRoots {
			if a.Exists {
				readRoots = append(readRoots, a.Path)
			}
		}
	}
	for _, root := range readRoots {
		rules, err := splitGrant(root, readRights&handled, denied)
		if err != nil {
			return nil, nil, err
		}
		r.Rules = append(r.Rules, rules...)
	}
	for _, root := range writable {
		r.Rules = append(r.Rules, Rule{Path: root, Access: writeRights & handled})
	}
	for _, dev := range devices {
		if _, err := os.Lstat(dev); err == nil {
			r.Rules = append(r.Rules, Rule{Path: dev, Access: deviceRights & handled})
		}
	}
	return r, warnings, nil
}

// splitGrant grants access below root except below the denied paths:
// every entry on the way to a denied path is descended into, every other
// entry is granted whole. Directories on the way get READ_DIR only (their
// listing, which Landlock cannot narrow further: names inside a denied
// directory stay listable, contents do not). Symlinks are skipped, since a
// rule on one would land on its target, possibly a denied path.
func splitGrant(root string, access uint64, denied []string) ([]Rule, error) {
	deniedSet := map[string]bool{}
	onPath := map[string]bool{}
	for _, d := range denied {
		d = filepath.Clean(d)
		if d == root {
			return nil, nil
		}
		if !inside(d, root) {
			continue
		}
		deniedSet[d] = true
		for p := filepath.Dir(d); inside(p, root) || p == root; p = filepath.Dir(p) {
			onPath[p] = true
			if p == root {
				break
			}
		}
	}
	if len(deniedSet) == 0 {
		return []Rule{{Path: root, Access: access}}, nil
	}
	var rules []Rule
	var walk func(dir string) error
	walk = func(dir string) error {
		if a := access & unix.LANDLOCK_ACCESS_FS_READ_DIR; a != 0 {
			rules = append(rules, Rule{Path: dir, Access: a})
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("landlock: list %s to exclude denied paths: %w", dir, err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			switch {
			case deniedSet[p]:
			case e.Type()&os.ModeSymlink != 0:
			case onPath[p]:
				if e.IsDir() {
					if err := walk(p); err != nil {
						return err
					}
				}
			case e.IsDir():
				rules = append(rules, Rule{Path: p, Access: access})
			default:
				rules = append(rules, Rule{Path: p, Access: access & fileRights})
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return rules, nil
}

func inside(p, root string) bool {
	if root == "/" {
		return p != "/" && strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, root+"/")
}

func insideAny(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || inside(p, r) {
			return true
		}
	}
	return false
}

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
// one with a symlink earlier in its path is an error (Plan only produces
// resolved paths, so a symlink there was swapped in since, and following
// it could grant write access to wherever it points). A path that vanished
// since Plan is skipped (nothing is granted for it); any other failure is
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
		access &= fileRights
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
