//go:build linux

package landlock

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/launcher"
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
func Plan(c *policy.Compiled, abi int) (*launcher.Ruleset, []string, error) {
	r := &launcher.Ruleset{ABI: abi}
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
		r.Rules = append(r.Rules, launcher.Rule{Path: root, Access: writeRights & handled})
	}
	for _, dev := range devices {
		if _, err := os.Lstat(dev); err == nil {
			r.Rules = append(r.Rules, launcher.Rule{Path: dev, Access: deviceRights & handled})
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
func splitGrant(root string, access uint64, denied []string) ([]launcher.Rule, error) {
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
		return []launcher.Rule{{Path: root, Access: access}}, nil
	}
	var rules []launcher.Rule
	var walk func(dir string) error
	walk = func(dir string) error {
		if a := access & unix.LANDLOCK_ACCESS_FS_READ_DIR; a != 0 {
			rules = append(rules, launcher.Rule{Path: dir, Access: a})
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
				rules = append(rules, launcher.Rule{Path: p, Access: access})
			default:
				rules = append(rules, launcher.Rule{Path: p, Access: access & launcher.LandlockFileRights})
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
