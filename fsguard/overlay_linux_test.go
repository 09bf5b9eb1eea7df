//go:build linux

package fsguard_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/policy"
)

// mountOverlay mounts an overlayfs whose lower and upper layers are two
// different tmpfs instances (the shape of a container root or the test
// VM's root: stat(2) reports layer numbers that are not the overlay
// inodes a d_parent walk meets) and returns the merged directory.
func mountOverlay(t *testing.T, lowerContent map[string]string) string {
	t.Helper()
	base := realTempDir(t)
	lower, upper, merged := filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "merged")
	for _, d := range []string{lower, upper, merged} {
		mkdirAll(t, d)
	}
	for _, d := range []string{lower, upper} {
		if err := unix.Mount("tmpfs", d, "tmpfs", 0, ""); err != nil {
			t.Fatalf("mount tmpfs on %s: %v", d, err)
		}
		t.Cleanup(func() { unix.Unmount(d, unix.MNT_DETACH) })
	}
	for name, data := range lowerContent {
		writeFile(t, filepath.Join(lower, name), data)
	}
	mkdirAll(t, filepath.Join(upper, "up"))
	mkdirAll(t, filepath.Join(upper, "work"))
	opts := "lowerdir=" + lower + ",upperdir=" + upper + "/up,workdir=" + upper + "/work"
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Fatalf("mount overlayfs (%s): %v", opts, err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	return merged
}

// Anchors on overlayfs are refused whole: overlayfs copies up on its
// upper layer, where no anchor is an ancestor, and with layers on two
// filesystems its inode numbers repeat (a file and a directory share one),
// so an anchor there could match an unrelated inode. Nothing of the
// session may remain.
func TestOverlayAnchorsRefused(t *testing.T) {
	g := loadGuard(t)
	merged := mountOverlay(t, map[string]string{"ws/f": "orig", "home/.ssh/id_ed25519": "key", "home/notes.txt": "notes"})
	out := realTempDir(t)
	writeFile(t, filepath.Join(out, "f"), "orig")
	tests := []struct {
		name   string
		policy func() *policy.Compiled
		path   string // named in the error
	}{
		{"writable root", func() *policy.Compiled { return workspacePolicy(t, filepath.Join(merged, "ws"), nil, nil) },
			filepath.Join(merged, "ws")},
		{"denied read", func() *policy.Compiled {
			return workspacePolicy(t, realTempDir(t), nil, []string{filepath.Join(merged, "home/.ssh")})
		}, filepath.Join(merged, "home/.ssh")},
		{"readable root", func() *policy.Compiled {
			c := workspacePolicy(t, realTempDir(t), nil, nil)
			c.ReadAccess = policy.ReadAccessRestricted
			c.ReadableRoots = []policy.Anchor{anchorOf(t, filepath.Join(merged, "home"))}
			return c
		}, filepath.Join(merged, "home")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.policy()
			if err := fsguard.CheckPolicy(c); !errors.Is(err, fsguard.ErrOverlay) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("CheckPolicy = %v, want ErrOverlay naming %s", err, tt.path)
			}
			cg := testutil.NewCgroup(t)
			err := g.AddSession(cg.ID, c)
			if !errors.Is(err, fsguard.ErrOverlay) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("AddSession = %v, want ErrOverlay naming %s", err, tt.path)
			}
			// No half-built session: the cgroup is not confined at all.
			if got := inCgroup(t, &cg, "write", filepath.Join(out, "f"), tt.name); got != 0 {
				t.Fatalf("write outside after the refused AddSession: errno %v, want success (no session)", got)
			}
			checkContent(t, filepath.Join(out, "f"), tt.name)
			if err := g.RemoveSession(cg.ID); err == nil {
				t.Fatal("RemoveSession after a refused AddSession succeeded: a session was left behind")
			}
		})
	}
}

// More anchors than the process may have files open: identities are
// resolved in batches, so AddSession neither fails nor needs a higher
// RLIMIT_NOFILE.
func TestManyAnchorsUnderLowFileLimit(t *testing.T) {
	g := loadGuard(t)
	ws := realTempDir(t)
	const n = 600
	var protected []string
	for i := 0; i < n; i++ {
		p := filepath.Join(ws, "locked-"+strconv.Itoa(i))
		writeFile(t, p, "orig")
		protected = append(protected, p)
	}
	c := workspacePolicy(t, ws, protected, nil)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// Room for 100 more files than are open now: fewer than the anchors.
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(len(open) + 100)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	cg := testutil.NewCgroup(t)
	err = g.AddSession(cg.ID, c)
	if rerr := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("AddSession with %d anchors under RLIMIT_NOFILE %d: %v", n+1, low.Cur, err)
	}
	t.Cleanup(func() { g.RemoveSession(cg.ID) })
	last := protected[n-1]
	if got := inCgroup(t, &cg, "write", last, "changed"); got != unix.EACCES {
		t.Fatalf("write %s: errno %v, want EACCES", last, got)
	}
	checkContent(t, last, "orig")
}
