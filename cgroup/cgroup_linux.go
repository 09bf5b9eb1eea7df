//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
)

// FindMounts parses /proc/self/mountinfo.
func FindMounts() (Mounts, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Mounts{}, fmt.Errorf("find cgroup mounts: %w", err)
	}
	defer f.Close()
	m, err := ParseMountinfo(f)
	if err != nil {
		return Mounts{}, fmt.Errorf("find cgroup mounts: %w", err)
	}
	return m, nil
}

// Cgroup2Mount returns the cgroup2 mount point, or an error wrapping
// ErrNoCgroup2 that names the layout found instead.
func Cgroup2Mount() (string, error) {
	m, err := FindMounts()
	if err != nil {
		return "", err
	}
	return cgroup2Mount(m)
}

func cgroup2Mount(m Mounts) (string, error) {
	if m.Cgroup2 == "" {
		return "", fmt.Errorf("%w (cgroup layout: %s)", ErrNoCgroup2, m.Layout)
	}
	return m.Cgroup2, nil
}

// Controllers returns the controllers available in the cgroup2 group dir
// (its cgroup.controllers); for the mount point these are the controllers
// cgroup2 has at all.
func Controllers(dir string) ([]string, error) {
	return readWords(filepath.Join(dir, "cgroup.controllers"))
}

// SubtreeControl returns the controllers dir enables for its children.
func SubtreeControl(dir string) ([]string, error) {
	return readWords(filepath.Join(dir, "cgroup.subtree_control"))
}

// ID returns the cgroup id of the cgroup2 directory dir: its inode number,
// which is what bpf_get_current_cgroup_id returns on 64-bit kernels.
func ID(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, fmt.Errorf("cgroup id of %s: %w", dir, err)
	}
	return st.Ino, nil
}

func (c Config) resolve() (mount, parent string, err error) {
	return c.resolveWith(Cgroup2Mount)
}

// resolveWith is resolve with find finding the cgroup2 mount when c names
// none.
func (c Config) resolveWith(find func() (string, error)) (mount, parent string, err error) {
	mount, parent = c.Mount, c.Parent
	if parent == "" {
		parent = DefaultParent
	}
	if err := validateParent(parent); err != nil {
		return "", "", err
	}
	if mount == "" {
		if mount, err = find(); err != nil {
			return "", "", err
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil {
		return "", "", fmt.Errorf("cgroup2 mount %s: %w", mount, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return "", "", fmt.Errorf("%s is not a cgroup2 filesystem", mount)
	}
	return mount, filepath.Clean(parent), nil
}

// Resolved returns c with its cgroup2 mount point found (and checked), for
// a caller that hands the same Config to several operations: each would
// otherwise read /proc/self/mountinfo again.
func (c Config) Resolved() (Config, error) {
	return c.resolved(Cgroup2Mount)
}

// ResolvedIn is Resolved with the cgroup2 mount found in mounts (the
// caller's read of /proc/self/mountinfo, which it uses for more).
func (c Config) ResolvedIn(mounts []mountinfo.Mount) (Config, error) {
	return c.resolved(func() (string, error) { return cgroup2Mount(MountsIn(mounts)) })
}

func (c Config) resolved(find func() (string, error)) (Config, error) {
	mount, _, err := c.resolveWith(find)
	if err != nil {
		return c, err
	}
	c.Mount = mount
	return c, nil
}

// ParentDir returns the directory of the group that holds the session
// groups (<mount>/<parent>), creating it if needed: NewSession puts
// sessions there, and the network programs attach there once for all of
// them.
func ParentDir(cfg Config) (string, error) {
	mount, parent, err := cfg.resolve()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(mount, parent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create session parent group: %w", err)
	}
	return dir, nil
}

// NewSession creates the session group <mount>/<parent>/<id>, which must not
// exist yet, and applies limits where cgroup2 has the controller: it enables
// the controller in every ancestor's cgroup.subtree_control from the mount
// down to the parent, then writes the limit. Each limit it cannot apply is
// returned in Group.Warnings, not as an error: the caller decides whether a
// missing limit is fatal. On error nothing is left behind except the
// (shared, empty) parent group.
func NewSession(cfg Config, id string, limits Limits) (*Group, error) {
	return createGroup(cfg, id, limits, 0o755)
}

// createGroup is NewSession with the group directory's mode (NewSlot's marks
// it as a slot).
func createGroup(cfg Config, id string, limits Limits, mode os.FileMode) (*Group, error) {
	if err := ValidateSessionID(id); err != nil {
		return nil, err
	}
	mount, parent, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("create session %s: %w", id, err)
	}
	parentDir := filepath.Join(mount, parent)
	if err := os.MkdirAll(parentDir, 0o755); err != nil {
		return nil, fmt.Errorf("create session parent group: %w", err)
	}
	g := &Group{ID: id, Path: filepath.Join(parentDir, id), mount: mount, rel: "/" + parent + "/" + id}
	if err := os.Mkdir(g.Path, mode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create session %s: group %s already exists", id, g.Path)
		}
		return nil, fmt.Errorf("create session %s: %w", id, err)
	}
	if g.CgroupID, err = ID(g.Path); err != nil {
		os.Remove(g.Path)
		return nil, fmt.Errorf("create session %s: %w", id, err)
	}
	if err := g.SetLimits(limits); err != nil {
		os.Remove(g.Path)
		return nil, fmt.Errorf("create session %s: %w", id, err)
	}
	return g, nil
}

// OpenSession returns the existing session group id.
func OpenSession(cfg Config, id string) (*Group, error) {
	if err := ValidateSessionID(id); err != nil {
		return nil, err
	}
	mount, parent, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("open session %s: %w", id, err)
	}
	g := &Group{ID: id, Path: filepath.Join(mount, parent, id), mount: mount, rel: "/" + parent + "/" + id}
	if g.CgroupID, err = ID(g.Path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open session %s: no such session (%s does not exist)", id, g.Path)
		}
		return nil, fmt.Errorf("open session %s: %w", id, err)
	}
	return g, nil
}

// ListSessions returns the ids of the session groups under the parent
// (not the slots waiting for a session: NewSlot).
func ListSessions(cfg Config) ([]string, error) {
	mount, parent, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	entries, err := os.ReadDir(filepath.Join(mount, parent))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && ValidateSessionID(e.Name()) == nil && kindOf(filepath.Join(mount, parent, e.Name())) == kindSession {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

func (g *Group) manager() (*cgroup2.Manager, error) {
	return cgroup2.Load(g.rel, cgroup2.WithMountpoint(g.mount))
}

// OpenFD opens the group directory as an O_PATH descriptor for
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}: clone3 with
// CLONE_INTO_CGROUP starts the child already inside the group, so not one
// instruction of it runs outside. The caller closes the file.
func (g *Group) OpenFD() (*os.File, error) {
	fd, err := unix.Open(g.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", g.Path, err)
	}
	return os.NewFile(uintptr(fd), g.Path), nil
}

// Type returns the group's cgroup.type: "domain", "threaded", "domain threaded"
// or "domain invalid".
func (g *Group) Type() (string, error) {
	b, err := os.ReadFile(filepath.Join(g.Path, "cgroup.type"))
	if err != nil {
		return "", fmt.Errorf("read cgroup type: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// AddProcess moves every thread of pid into the group by writing the pid to
// cgroup.procs: the kernel migrates the whole thread group in one operation,
// so no thread is left behind and none can be created outside meanwhile.
// This holds for threaded groups too (measured on 6.1 and 6.18): there,
// writing tids to cgroup.threads fails with EOPNOTSUPP for a thread coming
// from outside the group's threaded subtree, so it is never the way in.
func (g *Group) AddProcess(pid int) error {
	if err := writeFile(filepath.Join(g.Path, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("move pid %d into %s: %w", pid, g.Path, err)
	}
	return nil
}

// MigrateSelfInPlace moves the calling process into the group it is in
// already, below mount: a migration that moves nothing, done for what it
// costs. Without cgroup2's favordynmods the first migration after a quiet
// spell waits for an RCU grace period (cgroup_threadgroup_rwsem taken for
// write: ~7 ms measured on this project's VM), and one that begins within
// a grace period of the last one's end does not (~0.3 ms). Started just
// ahead of a migration that matters and cannot be avoided (a nested
// session's launcher, which only a move puts in its group), it takes that
// wait off it. It holds cgroup_mutex while it waits, as every migration
// does, so that migration follows it at once.
//
// The write names the group read just before it: a move of this process
// by someone else in between (nothing of this project moves its
// supervisors) is undone, as if the move had come first and this call
// after it. Nothing depends on the supervisor's own group but its
// accounting: it is confined by none of the session rules either way.
func MigrateSelfInPlace(mount string) error {
	own, err := CgroupOf(os.Getpid())
	if err != nil {
		return err
	}
	// "0" is the writer itself: no other process is ever moved.
	if err := writeFile(filepath.Join(mount, own, "cgroup.procs"), "0"); err != nil {
		return fmt.Errorf("move this process into its own group %s: %w", own, err)
	}
	return nil
}

// AddThread writes one tid to cgroup.threads. The kernel accepts it only for
// a threaded group and a thread already inside the same threaded subtree.
func (g *Group) AddThread(tid int) error {
	if err := writeFile(filepath.Join(g.Path, "cgroup.threads"), strconv.Itoa(tid)); err != nil {
		return fmt.Errorf("move tid %d into %s: %w", tid, g.Path, err)
	}
	return nil
}

// Procs lists the processes in the group and its descendant groups. The
// kernel refuses (EOPNOTSUPP) to list processes of a threaded group: use
// Threads there.
func (g *Group) Procs() ([]int, error) {
	mgr, err := g.manager()
	if err != nil {
		return nil, err
	}
	ids, err := mgr.Procs(true)
	if err != nil {
		return nil, fmt.Errorf("list processes of %s: %w", g.Path, err)
	}
	return toInts(ids), nil
}

// Threads lists the threads in the group and its descendant groups.
func (g *Group) Threads() ([]int, error) {
	mgr, err := g.manager()
	if err != nil {
		return nil, err
	}
	ids, err := mgr.Threads(true)
	if err != nil {
		return nil, fmt.Errorf("list threads of %s: %w", g.Path, err)
	}
	return toInts(ids), nil
}

func numericNames(entries []os.DirEntry) []int {
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// writeFile writes to an existing kernel file without O_CREAT/O_TRUNC.
// writeFile and readFile are os.WriteFile and os.ReadFile for cgroup
// files by plain system calls: an *os.File of a pollable cgroup file is
// registered with the runtime's poller, four system calls more per file
// (a session's teardown reads and writes several).
func writeFile(path, value string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	_, werr := unix.Write(fd, []byte(value))
	cerr := unix.Close(fd)
	if werr != nil {
		return &fs.PathError{Op: "write", Path: path, Err: werr}
	}
	if cerr != nil {
		return &fs.PathError{Op: "close", Path: path, Err: cerr}
	}
	return nil
}

func readFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var out []byte
	buf := make([]byte, 512)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

func readWords(path string) ([]string, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return strings.Fields(string(b)), nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func wordsOrNone(w []string) string {
	if len(w) == 0 {
		return "none"
	}
	return strings.Join(w, " ")
}

func toInts(ids []uint64) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
