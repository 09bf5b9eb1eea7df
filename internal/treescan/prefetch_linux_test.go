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

// TestNoPrefetchWithThreadAccess: a scan on a thread whose file access is
// its own (setfsuid, as the daemon scans for a user) looks every
// directory up itself, since other threads would look up with the
// process's access; it finds what a full walk as that user finds.
func TestNoPrefetchWithThreadAccess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: setfsuid needs root")
	}
	const nobody = 65534
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
	// The tree's directories are 0755 (write), so uid nobody can walk it.
	if err := os.Rename(wideTree(t, true), root); err != nil {
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
		if got := rels(o.res.Picked); !slices.Equal(got, want) {
			t.Fatalf("scan %d as uid %d picked %v, a full walk %v", i, nobody, got, want)
		}
	}
	if second := out[1].res; second.DirsCached < minPrefetch || second.DirsPrefetched != 0 {
		t.Fatalf("second scan as uid %d: %d directories from the cache (%q), %d prefetched; want the cache used and nothing prefetched", nobody, second.DirsCached, second.CacheUnused, second.DirsPrefetched)
	}
}
