//go:build linux

package fsguard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
)

// ErrOverlay is returned for an anchor on overlayfs. Overlayfs writes its
// upper layer on the session's behalf (copy-up, new files) with the
// mounter's credentials; those operations reach the LSM hooks on the
// upper layer's own dentries, whose ancestry holds no anchor, so every
// write below a writable root there would be refused. And with layers on
// different filesystems its inode numbers repeat (seen in the test VM: a
// file and a directory both (0:35, 4)), so any anchor could match an
// unrelated inode, refusing it or admitting it. Landlock ties rules to
// the overlay's own inodes and handles this case.
var ErrOverlay = errors.New("anchor on overlayfs: the BPF-LSM layer cannot identify overlayfs inodes reliably (Landlock can; or keep the workspace and listed paths off overlayfs)")

// ErrSubvolumes is returned for an anchor on a filesystem whose inode
// numbers are unique only within a subvolume (btrfs, bcachefs), or whose
// stat(2) device differs from the superblock's (the sign of one): the
// programs key anchors by (superblock device, inode number), which would
// match inodes of other subvolumes. Landlock handles this case.
var ErrSubvolumes = errors.New("anchor on a filesystem with subvolumes: its inode numbers repeat across subvolumes, so the BPF-LSM layer cannot identify the inode (Landlock can)")

const (
	btrfsMagic    = 0x9123683e // BTRFS_SUPER_MAGIC
	bcachefsMagic = 0xca451a4e // BCACHEFS_SUPER_MAGIC
)

// CheckPolicy reports what the programs cannot enforce for c; AddSession
// refuses such a policy. Callers that can fall back to another layer use
// it to decide before building a session.
func CheckPolicy(c *policy.Compiled) error {
	if c == nil || !c.FilesystemRules {
		return nil
	}
	sets := [][]policy.Anchor{c.WritableRoots, c.ProtectedPaths, c.DenyRead}
	if c.ReadAccess == policy.ReadAccessRestricted {
		sets = append(sets, c.ReadableRoots)
	}
	for _, set := range sets {
		for _, a := range set {
			if err := notOverlay(a.Path, a.Exists); err != nil {
				return err
			}
		}
	}
	for _, p := range c.Network.AllowUnixSockets {
		if err := notOverlay(p, true); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func notOverlay(path string, exists bool) error {
	if !exists {
		return nil
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(path, &sfs); err != nil {
		return fmt.Errorf("statfs %s: %w", path, err)
	}
	return fsTypeError(path, sfs.Type)
}

// fsTypeError says why anchors on a filesystem of type magic cannot work.
func fsTypeError(path string, magic int64) error {
	switch magic {
	case unix.OVERLAYFS_SUPER_MAGIC:
		return fmt.Errorf("%s: %w", path, ErrOverlay)
	case btrfsMagic, bcachefsMagic:
		return fmt.Errorf("%s: %w", path, ErrSubvolumes)
	}
	return nil
}

type kindedAnchor struct {
	policy.Anchor
	kind Kind
	what string
}

// kernelIdentities returns, for each anchor, the (s_dev, i_ino) under
// which the programs' d_parent walk meets it. stat(2) is not that
// identity everywhere (overlayfs non-directories, btrfs subvolumes), so each
// anchor is opened and the kernel is asked about the open file. The open
// does not follow symlinks and must find the very inode the policy was
// compiled against: a path swapped since then is an error, not a rule on
// whatever now lives there.
func (g *Guard) kernelIdentities(anchors []kindedAnchor) ([]loader.AnchorID, error) {
	ids := make([]loader.AnchorID, 0, len(anchors))
	// In batches: a policy may hold more anchors than this process may
	// have files open.
	for start := 0; start < len(anchors); start += identityBatch {
		batch, err := g.identityBatch(anchors[start:min(start+identityBatch, len(anchors))])
		if err != nil {
			return nil, err
		}
		ids = append(ids, batch...)
	}
	return ids, nil
}

// identityBatch is how many anchors are open at once while resolving.
const identityBatch = 64

func (g *Guard) identityBatch(anchors []kindedAnchor) ([]loader.AnchorID, error) {
	fds := make([]int, 0, len(anchors))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, a := range anchors {
		fd, err := unix.Open(a.Path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s %s: %w", a.what, a.Path, err)
		}
		fds = append(fds, fd)
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(fd, &sfs); err != nil {
			return nil, fmt.Errorf("statfs %s %s: %w", a.what, a.Path, err)
		}
		if err := fsTypeError(a.what+" "+a.Path, sfs.Type); err != nil {
			return nil, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, fmt.Errorf("stat %s %s: %w", a.what, a.Path, err)
		}
		if st.Dev != a.Dev || st.Ino != a.Ino {
			return nil, fmt.Errorf("%s %s changed since the policy was compiled (was dev %d ino %d, now dev %d ino %d)",
				a.what, a.Path, a.Dev, a.Ino, st.Dev, st.Ino)
		}
	}
	if len(fds) == 0 {
		return nil, nil
	}
	byFD, err := g.anchors.Resolve(fds)
	if err != nil {
		return nil, err
	}
	ids := make([]loader.AnchorID, len(fds))
	for i, fd := range fds {
		ids[i] = byFD[fd]
		a := anchors[i]
		// stat's device is the superblock's everywhere inode numbers are
		// unique per superblock; where it is not, they are unique only
		// per subvolume.
		if ids[i].Dev != unix.Major(a.Dev)<<20|unix.Minor(a.Dev) {
			return nil, fmt.Errorf("%s %s (device %d:%d, superblock %d:%d): %w", a.what, a.Path,
				unix.Major(a.Dev), unix.Minor(a.Dev), ids[i].Dev>>20, ids[i].Dev&(1<<20-1), ErrSubvolumes)
		}
	}
	return ids, nil
}

// bpf/fs.h's FS_SESSION_* flags.
const (
	sessionRestrictedRead = 1 << 0
	sessionInetOnly       = 1 << 1
)

// maxSubmounts bounds the mounts added below readable roots.
const maxSubmounts = 4096

// withSubmounts returns roots plus the root of every filesystem mounted
// below one of them. The programs' d_parent walk ends at a filesystem's
// root, so without them /sys would not cover /sys/fs/cgroup nor /run
// cover /run/user/1000. Only readable roots get this: a writable anchor
// on a filesystem's root would make that filesystem writable wherever it
// is mounted, not only below the root.
func withSubmounts(roots []policy.Anchor) []policy.Anchor {
	out := append([]policy.Anchor(nil), roots...)
	mounts, err := mountPoints()
	if err != nil {
		return out
	}
	for _, mp := range mounts {
		if len(out)-len(roots) >= maxSubmounts {
			break
		}
		for _, r := range roots {
			if !r.Exists || !r.Dir || mp == r.Path || !strings.HasPrefix(mp, strings.TrimSuffix(r.Path, "/")+"/") {
				continue
			}
			var st unix.Stat_t
			if unix.Stat(mp, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				break
			}
			// Optional: an overlayfs below stays unreadable rather than
			// refuse the session (see ErrOverlay).
			if notOverlay(mp, true) != nil {
				break
			}
			out = append(out, policy.Anchor{Path: mp, Dev: st.Dev, Ino: st.Ino, Dir: true, Exists: true,
				Source: "mounted below readable root " + r.Path})
			break
		}
	}
	return out
}

// mountPoints lists the mount points of this process's mount namespace.
func mountPoints() ([]string, error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(mounts))
	for _, m := range mounts {
		out = append(out, m.Point)
	}
	return out, nil
}

// socketAnchors resolves the AF_UNIX sockets a policy allows. A listed
// socket that does not exist now is skipped: it is not connectable by
// anyone, and one created later is a new inode the rule never named.
func socketAnchors(paths []string) ([]policy.Anchor, error) {
	var out []policy.Anchor
	for _, p := range paths {
		resolved, err := filepath.EvalSymlinks(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("allowed unix socket %s: %w", p, err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(resolved, &st); err != nil {
			return nil, fmt.Errorf("allowed unix socket %s: %w", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return nil, fmt.Errorf("allowed unix socket %s: %s is not a socket", p, resolved)
		}
		out = append(out, policy.Anchor{Path: resolved, Dev: st.Dev, Ino: st.Ino, Exists: true, Source: "network.allow_unix_sockets"})
	}
	return out, nil
}

// addGlobScopes writes the directories below which s's deny-read globs
// apply. A scope that does not exist has nothing below it yet; the glob
// is then not enforced there by this layer (the policy compiler resolved
// Within from an existing workspace).
func (g *Guard) addGlobScopes(cgroupID uint64, s *session) error {
	bits := map[string]uint32{}
	var order []string
	for k, slot := range s.globs {
		if slot.excludeOf >= 0 {
			continue
		}
		within := s.globSrc[slot.source].Within
		if _, ok := bits[within]; !ok {
			order = append(order, within)
		}
		bits[within] |= 1 << k
	}
	var anchors []kindedAnchor
	var masks []uint32
	for _, within := range order {
		var st unix.Stat_t
		if err := unix.Stat(within, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("deny-read glob scope %s: %w", within, err)
		}
		anchors = append(anchors, kindedAnchor{policy.Anchor{Path: within, Dev: st.Dev, Ino: st.Ino, Dir: true, Exists: true}, KindDenyGlob, "deny-read glob scope"})
		masks = append(masks, bits[within])
	}
	ids, err := g.kernelIdentities(anchors)
	if err != nil {
		return err
	}
	for i, id := range ids {
		key := loader.FSAnchorKey{CgroupId: cgroupID, Ino: id.Ino, Dev: id.Dev}
		if err := g.progs.GlobScopes.Update(key, masks[i], ebpf.UpdateNoExist); err != nil {
			return fmt.Errorf("write deny-read glob scope %s: %w", anchors[i].Path, err)
		}
		s.scopes = append(s.scopes, key)
	}
	return nil
}

// bpf is the slot in bpf/fs.h's layout.
func (s globSlot) bpf() loader.FSGlob {
	var g loader.FSGlob
	for i := 0; i < len(s.prefix); i++ {
		g.Prefix[i] = int8(s.prefix[i])
	}
	for i := 0; i < len(s.suffix); i++ {
		g.Suffix[maxGlobLen-len(s.suffix)+i] = int8(s.suffix[i])
	}
	g.PrefixLen, g.SuffixLen = uint8(len(s.prefix)), uint8(len(s.suffix))
	if s.star {
		g.Star = 1
	}
	if s.excludeOf >= 0 {
		g.ExcludeOf = uint8(s.excludeOf + 1)
	}
	return g
}
