//go:build linux

package treescan

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCacheOnlyWhereTheKernelKeepsCtimes: a root on a filesystem whose
// ctimes the kernel does not keep itself (procfs here, standing in for
// FUSE and network filesystems) is read in full on every scan, with a
// usable cache directory, and says why; a root on this test's temporary
// directory is remembered.
func TestCacheOnlyWhereTheKernelKeepsCtimes(t *testing.T) {
	for _, c := range []struct {
		magic uint32
		kept  bool
	}{
		{unix.EXT4_SUPER_MAGIC, true}, {unix.TMPFS_MAGIC, true}, {unix.XFS_SUPER_MAGIC, true}, {unix.BTRFS_SUPER_MAGIC, true},
		{unix.FUSE_SUPER_MAGIC, false}, {unix.NFS_SUPER_MAGIC, false}, {unix.OVERLAYFS_SUPER_MAGIC, true}, {unix.PROC_SUPER_MAGIC, false},
	} {
		if got := ctimeKept(c.magic); got != c.kept {
			t.Errorf("ctimeKept(%#x) = %v, want %v", c.magic, got, c.kept)
		}
	}
	cache := cacheDir(t)
	for range 2 {
		res, err := Scan("/proc/self/attr", Options{Classify: classify, Key: "k", CacheDir: cache, RacyWindow: -1})
		if err != nil {
			t.Fatal(err)
		}
		if res.DirsCached != 0 || res.DirsRead == 0 || !strings.Contains(res.CacheUnused, "does not keep") {
			t.Fatalf("a root on procfs: read %d, cached %d, CacheUnused %q; want every directory read and the reason", res.DirsRead, res.DirsCached, res.CacheUnused)
		}
	}
	root := tree(t)
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		t.Fatal(err)
	}
	if !ctimeKept(uint32(st.Type)) {
		t.Skipf("SKIPPED: the test's temporary directory is on filesystem type %#x, whose ctimes are not trusted", uint32(st.Type))
	}
	settle()
	for i := range 2 {
		res, err := Scan(root, Options{Classify: classify, Key: "k", CacheDir: cache, RacyWindow: -1})
		if err != nil || res.CacheUnused != "" || i == 1 && res.DirsCached == 0 {
			t.Fatalf("scan %d of a root on type %#x: %v, CacheUnused %q, cached %d", i, uint32(st.Type), err, res.CacheUnused, res.DirsCached)
		}
	}
}
