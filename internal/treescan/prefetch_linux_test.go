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

// TestPrefetchWithThreadAccess: a scan on a thread whose file access is
// its own (setfsuid and supplementary groups, as the daemon scans for a
// user) spreads its lookups over threads that take exactly that access
// first; it finds what a full walk as that user finds, down to the
// directories only the user's group may search (a lookup with the
// process's groups or none would fail there and hide what they hold).
func TestPrefetchWithThreadAccess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: setfsuid needs root")
	}
	const nobody, group = 65534, 54322
	base, err := os.MkdirTemp("", "treescan-access-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	root, cache := filepath.Join(base, "ws"), filepath.Join(base, "cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(cache, nobody, -1); err != nil {
		t.Fatal(err)
	}
	// The tree's directories are 0755 (write), so uid nobody can walk it,
	// but the padding only with the group: every prefetched lookup below
	// pad/ needs it.
	if err := os.Rename(wideTree(t, true), root); err != nil {
		t.Fatal(err)
	}
	write(t, root, "pad/p03/q4/AGENTS.md", "pad/p11/q7/.claude/")
	pad := filepath.Join(root, "pad")
	if err := os.Chown(pad, 0, group); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pad, 0o750); err != nil {
		t.Fatal(err)
	}
	settle()
	want := oracle(t, root)
	type outcome struct {
		res Result
		err error
	}
	done := make(chan []outcome)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread dies with the goroutine
		if err := unix.Setgroups([]int{group}); err != nil {
			done <- []outcome{{err: err}}
			return
		}
		unix.Setfsuid(nobody)
		var out []outcome
		for range 2 {
			res, err := Scan(root, Options{Classify: classify, Key: "k", CacheDir: cache, RacyWindow: -1})
			out = append(out, outcome{res, err})
		}
		done <- out
	}()
	out := <-done
	for i, o := range out {
		if o.err != nil {
			t.Fatalf("scan %d as uid %d: %v", i, nobody, o.err)
		}
		if got := rels(o.res.Picked); !slices.Equal(got, want) || o.res.Unread != 0 {
			t.Fatalf("scan %d as uid %d picked %v (%d directories unread), a full walk %v", i, nobody, got, o.res.Unread, want)
		}
	}
	second := out[1].res
	if second.DirsCached < minPrefetch {
		t.Fatalf("second scan as uid %d: %d directories from the cache (%q); want the cache used", nobody, second.DirsCached, second.CacheUnused)
	}
	if runtime.GOMAXPROCS(0) < 2 {
		t.Logf("SKIPPED: GOMAXPROCS %d: no prefetch threads to check", runtime.GOMAXPROCS(0))
		return
	}
	if second.DirsPrefetched == 0 {
		t.Fatalf("second scan as uid %d: nothing prefetched", nobody)
	}
}

// TestAdoptTakesTheThreadsAccess: a worker takes exactly the file access
// of a thread that has its own (fsuid, fsgid, groups, and the effective
// capabilities setfsuid leaves), so that the prefetch's workers do look up
// for such a scan rather than leave all of it to the scanning thread.
func TestAdoptTakesTheThreadsAccess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: setfsuid and setgroups need root")
	}
	const nobody, group = 65534, 54323
	type got struct {
		a, b   threadAccess
		ok     bool
		shared bool
	}
	done := make(chan got)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread dies with the goroutine
		var g got
		if err := unix.Setgroups([]int{group, 100}); err != nil {
			done <- g
			return
		}
		unix.Setfsgid(nobody)
		unix.Setfsuid(nobody)
		g.shared = accessShared()
		a, ok := currentAccess()
		if !ok {
			done <- g
			return
		}
		g.a = a
		worker := make(chan struct{})
		go func() {
			defer close(worker)
			g.ok = a.adopt()
			g.b, _ = currentAccess()
		}()
		<-worker
		done <- g
	}()
	g := <-done
	if g.shared {
		t.Fatal("a thread with fsuid nobody reported its access as the process's")
	}
	if !g.ok || g.b.uid != nobody || g.b.gid != nobody || !slices.Equal(g.b.groups, []int{100, group}) || g.b.caps != g.a.caps {
		t.Fatalf("worker adopted %v: access %+v, want %+v", g.ok, g.b, g.a)
	}
}
