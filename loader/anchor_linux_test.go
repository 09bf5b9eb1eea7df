//go:build linux

package loader

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// TestAnchorResolverMatchesKernel opens entries on several filesystems and
// compares the iterator's answer with stat(2) where the two must agree
// (tmpfs, procfs, the root filesystem's own directories) — and on an
// overlayfs whose layers live on two filesystems, where stat reports a
// directory's number from its layer and only the iterator gives the
// overlay inode that a d_parent walk meets.
func TestAnchorResolverMatchesKernel(t *testing.T) {
	testutil.RequireRoot(t)
	r, err := LoadAnchorResolver()
	if err != nil {
		t.Fatalf("LoadAnchorResolver: %v", err)
	}
	t.Cleanup(func() { r.Close() })

	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
	}{
		{"root", "/"},
		{"temp dir", dir},
		{"temp file", file},
		{"procfs", "/proc/self"},
	}
	var fds []int
	for _, tt := range tests {
		fd, err := unix.Open(tt.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open %s: %v", tt.path, err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		fds = append(fds, fd)
	}
	got, err := r.Resolve(fds)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st unix.Stat_t
			if err := unix.Fstat(fds[i], &st); err != nil {
				t.Fatal(err)
			}
			want := AnchorID{Dev: unix.Major(st.Dev)<<20 | unix.Minor(st.Dev), Ino: st.Ino}
			if fsIsOverlay(t, fds[i]) {
				t.Skipf("%s is on overlayfs, where stat and the kernel may disagree; covered by the overlay case", tt.path)
			}
			if got[fds[i]] != want {
				t.Errorf("kernel says %+v, stat says %+v", got[fds[i]], want)
			}
		})
	}

	if _, err := r.Resolve([]int{1 << 20}); err == nil {
		t.Error("Resolve of an fd that is not open succeeded")
	}
}

func fsIsOverlay(t *testing.T, fd int) bool {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		t.Fatal(err)
	}
	return sfs.Type == unix.OVERLAYFS_SUPER_MAGIC
}

// TestAnchorResolverOverlay builds an overlayfs from two tmpfs layers and
// checks that the resolver reports the overlay's own inode for a merged
// directory, the one its entries' d_parent points to.
func TestAnchorResolverOverlay(t *testing.T) {
	testutil.RequireRoot(t)
	r, err := LoadAnchorResolver()
	if err != nil {
		t.Fatalf("LoadAnchorResolver: %v", err)
	}
	t.Cleanup(func() { r.Close() })

	base := t.TempDir()
	lower, upper, merged := filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "merged")
	for _, d := range []string{lower, upper, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{lower, upper} {
		if err := unix.Mount("tmpfs", d, "tmpfs", 0, ""); err != nil {
			t.Fatalf("mount tmpfs on %s: %v", d, err)
		}
		t.Cleanup(func() { unix.Unmount(d, unix.MNT_DETACH) })
	}
	work := filepath.Join(upper, "work")
	up := filepath.Join(upper, "up")
	for _, d := range []string{work, up, filepath.Join(lower, "ws", "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := "lowerdir=" + lower + ",upperdir=" + up + ",workdir=" + work
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		t.Skipf("SKIP: cannot mount overlayfs here (%v); the overlay case is not tested on this kernel", err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })

	ws := filepath.Join(merged, "ws")
	wsFD, err := unix.Open(ws, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(wsFD) })
	// The parent of ws/sub, as the kernel sees it: open ws/sub/.. would
	// be ws again, so open ws/sub and compare with the iterator's view of
	// ws through a second fd obtained by openat(sub, "..").
	subFD, err := unix.Open(filepath.Join(ws, "sub"), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(subFD) })
	parentFD, err := unix.Openat(subFD, "..", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(parentFD) })

	got, err := r.Resolve([]int{wsFD, parentFD})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if got[wsFD] != got[parentFD] {
		t.Errorf("ws resolves to %+v, the parent of ws/sub to %+v: the same dentry must give the same identity", got[wsFD], got[parentFD])
	}
	var st unix.Stat_t
	if err := unix.Fstat(wsFD, &st); err != nil {
		t.Fatal(err)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(wsFD, &sfs); err != nil {
		t.Fatal(err)
	}
	if sfs.Type != unix.OVERLAYFS_SUPER_MAGIC {
		t.Fatalf("%s is not on overlayfs (magic %#x)", ws, sfs.Type)
	}
	t.Logf("overlay dir: stat (dev %d:%d, ino %d), kernel (dev %d:%d, ino %d)",
		unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino, got[wsFD].Dev>>20, got[wsFD].Dev&(1<<20-1), got[wsFD].Ino)
}
