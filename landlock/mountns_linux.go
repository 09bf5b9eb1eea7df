//go:build linux

package landlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/internal/shquote"
	"github.com/openoxide/oxsupervise/internal/treescan"
	"github.com/openoxide/oxsupervise/policy"
)

// MountPlan is what the launcher does to its private mount namespace before
// it drops privileges. Nothing here touches the host's mount table: Apply
// first makes every mount private, so the namespace dies with the session
// and leaves nothing behind.
type MountPlan struct {
	// Protected are existing protected paths, bound read-only onto
	// themselves: writes get EROFS, and unlink/rename of them gets EBUSY
	// because each is a mount point.
	Protected []policy.Anchor `json:"protected"`
	// Pinned are directories between a writable root and a protected path
	// (e.g. a repository's .git) bound onto themselves read-write, so they
	// cannot be renamed away and replaced by an unprotected copy.
	Pinned []string `json:"pinned"`
	// Masked are deny-read entries Landlock cannot exclude (inside
	// writable roots, matching a deny-read glob, or every existing anchor
	// in external-sandbox mode), hidden under an empty read-only tmpfs
	// (directories) or a read-only /dev/null (files).
	Masked []string `json:"masked"`
	// ReadOnly are kernel interfaces a session must not write: /sys (with
	// cgroupfs, bpffs, securityfs below it), /proc/sys, and any cgroup or
	// bpf mount elsewhere.
	ReadOnly []string `json:"read_only"`
	// ReadOnlyView makes every mount read-only except Writable (see
	// applyReadOnlyView): how the Landlock path refuses the metadata
	// changes Landlock has no right for (chmod, chown, utimes).
	ReadOnlyView bool `json:"read_only_view,omitempty"`
	// Writable are the directories that stay writable in the read-only
	// view (viewWritable).
	Writable []string `json:"writable,omitempty"`
	// PrivateShm puts a tmpfs of the session's own on /dev/shm (see
	// privateShm); ShmReadOnly makes it read-only (read-only mode). The
	// tmpfs is NewPrivateShm's, made by the supervisor: ShmFD is its
	// descriptor in the process that applies the plan.
	PrivateShm  bool `json:"private_shm,omitempty"`
	ShmReadOnly bool `json:"shm_read_only,omitempty"`
	ShmFD       int  `json:"shm_fd,omitempty"`
}

// PlanMounts computes the mount plan for c. rs may be nil (no Landlock).
func PlanMounts(c *policy.Compiled, rs *Ruleset) (MountPlan, error) {
	var m MountPlan
	ro, err := kernelInterfaceMounts()
	if err != nil {
		return m, err
	}
	m.ReadOnly = ro
	if c.Mode == policy.ModeFullAccess {
		return m, nil
	}
	if rs != nil {
		m.Masked = append(m.Masked, rs.Masked...)
	}
	m.Writable = viewWritable(c)
	if privateShm(c) {
		m.PrivateShm = true
		// PrivateShmWritable, from the writable list just made.
		m.ShmReadOnly = !slices.Contains(m.Writable, devShm)
	}
	socks, err := escapeSocketMasks(escapeSockets, c.Network.AllowUnixSockets)
	if err != nil {
		return m, err
	}
	m.Masked = append(m.Masked, socks...)
	// The bind step's walk of the workspace found the globs' entries
	// already (policy.Compiled.BoundGlobMatches); a glob it did not walk
	// for is walked here, with the supervisor's access. A cache the walk
	// cannot use only costs the start a full walk.
	var cache string
	for _, g := range c.DenyReadGlobs {
		matches, ok := c.BoundGlobMatches(g)
		if !ok {
			if cache == "" {
				cache, _ = policy.ScanCacheDir(os.Geteuid())
			}
			if matches, err = globMatches(g, maxGlobWalk, cache); err != nil {
				return m, err
			}
		}
		m.Masked = append(m.Masked, matches...)
	}
	if !c.FilesystemRules {
		// external-sandbox: the outer sandbox owns the filesystem, but
		// credentials stay unreadable. Splitting reads with Landlock would
		// make files created during the session in those directories
		// unreadable too, so existing anchors are hidden instead.
		for _, a := range c.DenyRead {
			if a.Exists {
				m.Masked = append(m.Masked, a.Path)
			}
		}
		return m, nil
	}
	pinned := map[string]bool{}
	firsts := map[string]bool{}
	for _, p := range c.ProtectedPatterns {
		if len(p.Components) > 1 {
			firsts[p.Components[0]] = true
		}
	}
	for _, a := range c.ProtectedPaths {
		if !a.Exists {
			continue
		}
		m.Protected = append(m.Protected, a)
		for _, root := range c.WritableRoots {
			if !inside(a.Path, root.Path) {
				continue
			}
			rel, err := filepath.Rel(root.Path, filepath.Dir(a.Path))
			if err != nil || rel == "." {
				continue
			}
			comps := strings.Split(rel, string(filepath.Separator))
			for i, comp := range comps {
				if !firsts[comp] {
					continue
				}
				for j := i; j < len(comps); j++ {
					pinned[filepath.Join(append([]string{root.Path}, comps[:j+1]...)...)] = true
				}
				break
			}
		}
	}
	for p := range pinned {
		m.Pinned = append(m.Pinned, p)
	}
	sort.Strings(m.Pinned)
	return m, nil
}

// escapeSockets are well-known sockets whose servers act for the user
// outside the session: through them a confined process can start processes
// outside its cgroup and every other layer (systemd-run --user, docker run
// -v /:/host) or use the user's keys (agents). Landlock cannot refuse
// connect(2) on a pathname socket, so the mount layer hides them unless the
// policy lists them in network.allow_unix_sockets.
var escapeSockets = []string{
	"/run/user/*/bus", "/run/user/*/systemd/private", "/run/user/*/systemd/io.systemd.*",
	"/run/dbus/system_bus_socket", "/run/systemd/private",
	"/run/docker.sock", "/run/user/*/docker.sock", "/run/containerd/containerd.sock",
	"/run/podman/podman.sock", "/run/user/*/podman/podman.sock",
	"/run/user/*/gnupg/S.gpg-agent*", "/run/user/*/keyring/*", "/tmp/ssh-*/agent.*",
}

// escapeSocketMasks lists the existing sockets matching globs, symlinks
// resolved (the mount layer refuses to follow them), except allowed ones.
func escapeSocketMasks(globs, allowed []string) ([]string, error) {
	allow := map[string]bool{}
	for _, a := range allowed {
		allow[filepath.Clean(a)] = true
		if r, err := filepath.EvalSymlinks(a); err == nil {
			allow[r] = true
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, g := range globs {
		matches, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("mount namespace: escape socket pattern %s: %w", g, err)
		}
		for _, p := range matches {
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				continue // vanished, or a dangling link: nothing to reach
			}
			fi, err := os.Lstat(real)
			if err != nil || fi.Mode().Type() != os.ModeSocket || allow[p] || allow[real] || seen[real] {
				continue
			}
			seen[real] = true
			out = append(out, real)
		}
	}
	return out, nil
}

// maxGlobWalk bounds the walk for deny-read globs: a workspace with more
// entries than this fails closed instead of stalling the start.
const maxGlobWalk = policy.MaxGlobWalk

// globMatches lists the existing entries below g.Within that g matches
// (policy.ScanGlob: symlinks neither followed nor masked, .git not
// descended into), with cache (policy.ScanCacheDir; "" for none), so an
// unchanged directory of a large workspace costs one lstat per start.
func globMatches(g policy.NameGlob, limit int, cache string) ([]string, error) {
	if _, err := os.Lstat(g.Within); os.IsNotExist(err) {
		return nil, nil
	}
	out, err := policy.ScanGlob(g, limit, cache)
	if errors.Is(err, treescan.ErrLimit) {
		err = fmt.Errorf("more than %d entries below %s", limit, g.Within)
	}
	if err != nil {
		return nil, fmt.Errorf("mount namespace: deny-read %s below %s: %w", g.Include, g.Within, err)
	}
	return out, nil
}

// kernelInterfaceMounts lists the mount points made read-only in every
// session: /sys and /proc/sys, plus cgroup and bpf filesystems mounted
// outside /sys.
func kernelInterfaceMounts() ([]string, error) {
	out := []string{"/sys", "/proc/sys"}
	mounts, err := mountinfo.Read()
	if err != nil {
		return nil, fmt.Errorf("mount namespace: read mountinfo: %w", err)
	}
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup", "cgroup2", "bpf":
			if m.Point != "/sys" && !strings.HasPrefix(m.Point, "/sys/") {
				out = append(out, m.Point)
			}
		}
	}
	return out, nil
}

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
			writable = slices.DeleteFunc(slices.Clone(writable), func(d string) bool { return d == devShm })
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
		anchor   *policy.Anchor
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
func bindSelf(p string, readOnly bool, anchor *policy.Anchor) error {
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
