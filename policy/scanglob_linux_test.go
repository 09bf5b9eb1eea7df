//go:build linux

package policy

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// asFileUID runs fn on a thread of its own whose file access is uid's
// (no supplementary groups; the thread dies afterwards), as the daemon
// binds a user's policy.
func asFileUID(t *testing.T, uid int, fn func()) {
	t.Helper()
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread dies with the goroutine
		if err := unix.Setgroups([]int{}); err != nil {
			done <- err
			return
		}
		unix.Setfsgid(uid)
		unix.Setfsuid(uid)
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestBoundGlobMatchesNeedTheSameAccess: matches the bind step found with
// one file-access uid are handed to a caller with another (the daemon
// binds with the user's access and plans mounts as root) only when that
// walk read every directory it was asked about; when it could not read
// one, the caller with other access walks with its own access instead,
// and finds what the bind's walk could not.
func TestBoundGlobMatchesNeedTheSameAccess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: setfsuid needs root")
	}
	const nobody = 65534
	for _, tc := range []struct {
		name string
		// private: ws/private (holding a .env) only root may read.
		private        bool
		bindAs, askAs  int
		handedOver     bool
		wantFromWalker []string // what the bind found (rel to ws)
	}{
		{"bound as root, asked as nobody", false, 0, nobody, true, []string{".env", "private/.env"}},
		{"bound as nobody, every directory readable, asked as root", false, nobody, 0, true, []string{".env", "private/.env"}},
		{"bound as nobody, a directory it cannot read, asked as root", true, nobody, 0, false, []string{".env"}},
		{"bound as nobody, a directory it cannot read, asked as nobody", true, nobody, nobody, true, []string{".env"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.write(t, "ws/.env", "x")
			f.write(t, "ws/private/.env", "x")
			// The test's temporary directories are 0700: nobody must reach
			// the workspace (and home) to bind as it.
			for _, d := range []string{filepath.Dir(f.root), f.root} {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.private {
				if err := os.Chmod(filepath.Join(f.ws, "private"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			var c *Compiled
			var err error
			asFileUID(t, tc.bindAs, func() {
				c, _, err = Load(LoadOptions{ManagedDir: f.managed, Home: f.home, Workspace: f.ws, Env: func(string) string { return "" }})
			})
			if err != nil {
				t.Fatal(err)
			}
			g := c.DenyReadGlobs[0]
			var want []string
			for _, r := range tc.wantFromWalker {
				want = append(want, filepath.Join(f.ws, r))
			}
			var got []string
			var ok bool
			asFileUID(t, tc.askAs, func() { got, ok = c.BoundGlobMatches(g) })
			if ok != tc.handedOver {
				t.Fatalf("matches bound as uid %d handed to a caller accessing files as uid %d: %v, want %v", tc.bindAs, tc.askAs, ok, tc.handedOver)
			}
			if ok && !slices.Equal(got, want) {
				t.Fatalf("matches handed over %v, want %v", got, want)
			}
			if !ok {
				// The caller walks itself, with its access, and finds what
				// the bind's walk could not.
				var walked []string
				asFileUID(t, tc.askAs, func() { walked, err = ScanGlob(g, MaxGlobWalk, "") })
				if err != nil {
					t.Fatal(err)
				}
				if all := []string{filepath.Join(f.ws, ".env"), filepath.Join(f.ws, "private/.env")}; !slices.Equal(walked, all) {
					t.Fatalf("the caller's own walk found %v, want %v", walked, all)
				}
			}
		})
	}
}
