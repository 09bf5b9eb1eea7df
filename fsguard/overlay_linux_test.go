//go:build linux

package fsguard_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/internal/testutil"
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

// A writable root on overlayfs is refused whole: overlayfs copies up on
// its upper layer, where no anchor is an ancestor, and its inode numbers
// repeat across layers. Nothing of the session may remain.
func TestOverlayWritableRootRefused(t *testing.T) {
	g := loadGuard(t)
	merged := mountOverlay(t, map[string]string{"ws/f": "orig"})
	ws := filepath.Join(merged, "ws")
	out := realTempDir(t)
	writeFile(t, filepath.Join(out, "f"), "orig")
	c := workspacePolicy(t, ws, nil, nil)
	if err := fsguard.CheckPolicy(c); !errors.Is(err, fsguard.ErrOverlayRoot) {
		t.Fatalf("CheckPolicy(writable root on overlayfs) = %v, want ErrOverlayRoot", err)
	}
	cg := testutil.NewCgroup(t)
	err := g.AddSession(cg.ID, c)
	if !errors.Is(err, fsguard.ErrOverlayRoot) || !strings.Contains(err.Error(), ws) {
		t.Fatalf("AddSession(writable root on overlayfs) = %v, want ErrOverlayRoot naming %s", err, ws)
	}
	// No half-built session: the cgroup is not confined at all.
	if got := inCgroup(t, &cg, "write", filepath.Join(out, "f"), "free"); got != 0 {
		t.Fatalf("write outside after the refused AddSession: errno %v, want success (no session)", got)
	}
	checkContent(t, filepath.Join(out, "f"), "free")
	if err := g.RemoveSession(cg.ID); err == nil {
		t.Fatal("RemoveSession after a refused AddSession succeeded: a session was left behind")
	}
}

// Anchors on an overlayfs that are not writable roots (a credential
// directory, a secret file) match the overlay inodes the d_parent walk
// meets, which stat(2) does not report for every entry there (non-directories
// get the layer's st_dev).
func TestOverlayDenyReadAnchors(t *testing.T) {
	g := loadGuard(t)
	ev := collectEvents(t, g)
	merged := mountOverlay(t, map[string]string{
		"home/.ssh/id_ed25519": "key",
		"home/secret.key":      "secret",
		"home/notes.txt":       "notes",
	})
	ws := realTempDir(t)
	home := filepath.Join(merged, "home")
	cg := testutil.NewCgroup(t)
	if err := g.AddSession(cg.ID, workspacePolicy(t, ws, nil, []string{filepath.Join(home, ".ssh"), filepath.Join(home, "secret.key")})); err != nil {
		t.Fatalf("AddSession: %v", err)
	}
	t.Cleanup(func() { g.RemoveSession(cg.ID) })

	tests := []struct {
		name, op, path string
		want           syscall.Errno
		wantOp         fsguard.Op
		wantKind       fsguard.Kind
	}{
		{"read key below denied dir", "read", filepath.Join(home, ".ssh/id_ed25519"), unix.EACCES, fsguard.OpOpenRead, fsguard.KindDenyRead},
		{"read denied file", "read", filepath.Join(home, "secret.key"), unix.EACCES, fsguard.OpOpenRead, fsguard.KindDenyRead},
		{"read ordinary file", "read", filepath.Join(home, "notes.txt"), 0, 0, 0},
		{"write ordinary file outside the root", "write", filepath.Join(home, "notes.txt"), unix.EACCES, fsguard.OpOpenWrite, fsguard.KindOutside},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := content(tt.path)
			if got := inCgroup(t, &cg, tt.op, tt.path, "changed"); got != tt.want {
				t.Fatalf("%s %s: errno %v, want %v", tt.op, tt.path, got, tt.want)
			}
			checkContent(t, tt.path, before)
			if tt.want != 0 {
				e := ev.waitFor(t, cg.ID, tt.wantOp, tt.path)
				if e.Kind != tt.wantKind || e.Errno != tt.want {
					t.Fatalf("event %+v: want kind %v errno %v", e, tt.wantKind, tt.want)
				}
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
