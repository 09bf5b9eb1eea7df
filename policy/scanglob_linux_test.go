//go:build linux

package policy

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBoundGlobMatchesNeedTheSameAccess: matches the bind step found with
// one file-access uid are not handed to a caller with another (the daemon
// binds with the user's access and plans mounts as root), which walks
// with its own access instead.
func TestBoundGlobMatchesNeedTheSameAccess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: setfsuid needs root")
	}
	f := newFixture(t)
	f.write(t, "ws/.env", "x")
	c, _, err := Load(LoadOptions{ManagedDir: f.managed, Home: f.home, Workspace: f.ws, Env: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	g := c.DenyReadGlobs[0]
	if _, ok := c.BoundGlobMatches(g); !ok {
		t.Fatal("no bound matches for the uid that bound")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Setfsuid(65534)
	_, ok := c.BoundGlobMatches(g)
	unix.Setfsuid(0)
	if ok {
		t.Fatal("matches bound as uid 0 were handed to a caller accessing files as uid 65534")
	}
}
