//go:build linux

package treescan

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// asUser runs fn on a thread of its own whose file access is uid's with
// the given groups (the thread dies afterwards).
func asUser(t *testing.T, uid int, groups []int, fn func()) {
	t.Helper()
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread dies with the goroutine
		if err := unix.Setgroups(groups); err != nil {
			done <- err
			return
		}
		unix.Setfsuid(uid)
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestUnreadableDirectoryNotRemembered: a directory the scanner cannot
// read is skipped, and not remembered as empty: once the same uid can
// read it (a group joined, which leaves the directory's ctime alone), the
// next scan finds what it holds.
func TestUnreadableDirectoryNotRemembered(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: setfsuid and setgroups need root")
	}
	const nobody, group = 65534, 54321
	base, err := os.MkdirTemp("", "treescan-unreadable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	root, cache := filepath.Join(base, "ws"), filepath.Join(base, "cache")
	write(t, root, "src/a.go", "private/AGENTS.md", "private/deep/.claude/settings.json")
	private := filepath.Join(root, "private")
	for _, step := range []error{
		os.Chmod(base, 0o755), os.Mkdir(cache, 0o700), os.Chown(cache, nobody, -1),
		os.Chown(private, 0, group), os.Chmod(private, 0o750),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	settle()
	scan := func(groups []int) Result {
		var res Result
		var err error
		asUser(t, nobody, groups, func() {
			res, err = Scan(root, Options{Classify: classify, Key: "k", CacheDir: cache, RacyWindow: -1})
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := scan(nil); len(res.Picked) != 0 || res.Unread != 1 {
		t.Fatalf("without the group, uid %d picked %v in a directory it cannot read, %d directories unread (want 1)", nobody, rels(res.Picked), res.Unread)
	}
	for i := range 2 {
		res := scan([]int{group})
		if got, want := rels(res.Picked), []string{"private/AGENTS.md", "private/deep/.claude"}; !slices.Equal(got, want) || res.Unread != 0 {
			t.Fatalf("scan %d with the group: picked %v (read %d, cached %d, unread %d), want %v and none unread", i, got, res.DirsRead, res.DirsCached, res.Unread, want)
		}
		if i == 1 && res.DirsCached == 0 {
			t.Fatalf("scan %d with the group used no cache (%q)", i, res.CacheUnused)
		}
	}
}
