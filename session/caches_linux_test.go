//go:build linux

package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
)

func TestPrepareSandboxCaches(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chowns the directories it creates")
	}
	home := t.TempDir()
	ws := policy.Anchor{Path: t.TempDir(), Exists: true}
	c := &policy.Compiled{Mode: policy.ModeWorkspaceWrite, FilesystemRules: true, WritableRoots: []policy.Anchor{ws}}
	env := []string{"HOME=" + home, "GOCACHE=/home/user/.cache/go-build", "KEEP=1"}
	got, err := prepareSandboxCaches(c, env, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(home, ".cache", SandboxCacheDir)
	if got.root != root || len(got.policy.WritableRoots) != 2 || got.policy.WritableRoots[1].Path != root || len(c.WritableRoots) != 1 {
		t.Errorf("root %s, roots %v (policy given %v)", got.root, got.policy.WritableRoots, c.WritableRoots)
	}
	joined := strings.Join(got.env, "\n")
	for _, want := range []string{"GOCACHE=" + root + "/go-build", "GOMODCACHE=" + root + "/go-mod", "npm_config_cache=" + root + "/npm",
		"PIP_CACHE_DIR=" + root + "/pip", "CARGO_HOME=" + root + "/cargo", "KEEP=1"} {
		if !strings.Contains(joined, want+"\n") && !strings.HasSuffix(joined, want) {
			t.Errorf("env lacks %s:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "/home/user/.cache/go-build") {
		t.Errorf("the user's own GOCACHE survived:\n%s", joined)
	}
	for _, m := range []policy.Mode{policy.ModeReadOnly, policy.ModeFullAccess} {
		if got, _ := prepareSandboxCaches(&policy.Compiled{Mode: m, FilesystemRules: m == policy.ModeReadOnly}, env, 0, 0); got != nil {
			t.Errorf("mode %s got sandbox caches", m)
		}
	}

	// A symlink on the way is never followed; a home of another user is
	// not written.
	home2, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(home2, ".cache")); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareSandboxCaches(c, []string{"HOME=" + home2}, 0, 0); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("symlinked ~/.cache: %v, want a refusal naming the symlink", err)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("created %v through the symlink", entries)
	}
	if _, err := prepareSandboxCaches(c, []string{"HOME=" + t.TempDir()}, 65534, 65534); err == nil || !strings.Contains(err.Error(), "owned by uid 0") {
		t.Errorf("home of another user: %v", err)
	}
}

// Only the root is created, owned by the session's user and private to
// it, and it is kept: the tools make their own directories below it, and
// a later session finds the root, and what a tool put there, as it was.
func TestSandboxCachesOnlyTheRootKept(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chowns the directories it creates")
	}
	ws := policy.Anchor{Path: t.TempDir(), Exists: true}
	c := &policy.Compiled{Mode: policy.ModeWorkspaceWrite, FilesystemRules: true, WritableRoots: []policy.Anchor{ws}}
	for _, tc := range []struct {
		name     string
		uid, gid int
		hasCache bool // ~/.cache exists before the first session
	}{
		{"root, no ~/.cache", 0, 0, false},
		{"user, no ~/.cache", 65534, 65534, false},
		{"user, ~/.cache there", 65534, 65534, true},
	} {
		home := t.TempDir()
		if err := os.Chown(home, tc.uid, tc.gid); err != nil {
			t.Fatal(err)
		}
		if tc.hasCache {
			if err := os.Mkdir(filepath.Join(home, ".cache"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		got, err := prepareSandboxCaches(c, []string{"HOME=" + home}, tc.uid, tc.gid)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(got.root, &st); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o777 != 0o700 || int(st.Uid) != tc.uid || int(st.Gid) != tc.gid {
			t.Errorf("%s: root %s mode %o owner %d:%d, want a directory 0700 of %d:%d", tc.name, got.root, st.Mode, st.Uid, st.Gid, tc.uid, tc.gid)
		}
		if a := got.policy.WritableRoots[len(got.policy.WritableRoots)-1]; a.Dev != uint64(st.Dev) || a.Ino != st.Ino {
			t.Errorf("%s: the writable root anchors %d:%d, the root is %d:%d", tc.name, a.Dev, a.Ino, st.Dev, st.Ino)
		}
		if entries, err := os.ReadDir(got.root); err != nil || len(entries) != 0 {
			t.Errorf("%s: the root holds %v (%v), want nothing until a tool writes its cache", tc.name, entries, err)
		}
		// What a tool made there is a later session's, and the root
		// stays the same directory.
		used := filepath.Join(got.root, "go-build", "00")
		if err := os.MkdirAll(used, 0o700); err != nil {
			t.Fatal(err)
		}
		again, err := prepareSandboxCaches(c, []string{"HOME=" + home}, tc.uid, tc.gid)
		if err != nil {
			t.Fatalf("%s: again: %v", tc.name, err)
		}
		if a := again.policy.WritableRoots[len(again.policy.WritableRoots)-1]; a.Ino != st.Ino {
			t.Errorf("%s: a later session anchors inode %d, the root was %d", tc.name, a.Ino, st.Ino)
		}
		if _, err := os.Stat(used); err != nil {
			t.Errorf("%s: a later session lost what a tool wrote: %v", tc.name, err)
		}
	}
}
