//go:build linux

package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// The directories a session created are removed at its end when it left
// them empty, and only those: startClose starts it, close returns once it
// is done, and either may come first or be repeated.
func TestSandboxCachesCloseRemovesTheUnused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chowns the directories it creates")
	}
	ws := policy.Anchor{Path: t.TempDir(), Exists: true}
	c := &policy.Compiled{Mode: policy.ModeWorkspaceWrite, FilesystemRules: true, WritableRoots: []policy.Anchor{ws}}
	for _, start := range []bool{true, false} {
		home := t.TempDir()
		got, err := prepareSandboxCaches(c, []string{"HOME=" + home}, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		used := filepath.Join(got.root, "go-build", "00")
		if err := os.Mkdir(used, 0o700); err != nil {
			t.Fatal(err)
		}
		if start {
			got.startClose()
		}
		got.close()
		got.close()
		for _, v := range cacheVars {
			_, err := os.Stat(filepath.Join(got.root, v.dir))
			if v.dir == "go-build" && err != nil {
				t.Errorf("startClose %v: the used cache %s is gone: %v", start, v.dir, err)
			}
			if v.dir != "go-build" && !os.IsNotExist(err) {
				t.Errorf("startClose %v: the unused cache %s is left: %v", start, v.dir, err)
			}
		}
		// A second session finds them there and creates none of its own.
		again, err := prepareSandboxCaches(c, []string{"HOME=" + home}, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		again.close()
		if _, err := os.Stat(used); err != nil {
			t.Errorf("startClose %v: a later session's end removed a used cache: %v", start, err)
		}
	}
}
