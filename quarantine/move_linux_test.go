//go:build linux

package quarantine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
)

func TestDeferredAndSuspicious(t *testing.T) {
	ws := t.TempDir()
	gitDir := filepath.Join(ws, ".git")
	for _, d := range []string{filepath.Join(gitDir, "worktrees", "wt"), filepath.Join(ws, "wt"), filepath.Join(ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &policy.Compiled{ProtectedPaths: []policy.Anchor{{Path: filepath.Join(gitDir, "config"), Exists: true}}}
	write := func(p, s string) string {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		path      string
		deferred  bool
		wantWhy   string // "" = benign
		isDirHint bool
	}{
		{write(filepath.Join(ws, "wt", ".git"), "gitdir: "+filepath.Join(gitDir, "worktrees", "wt")+"\n"), true, "", false},
		{write(filepath.Join(ws, "sub", ".git"), "gitdir: ../../elsewhere\n"), true, "not below an existing repository", false},
		{write(filepath.Join(gitDir, "worktrees", "wt", "commondir"), "../..\n"), true, "", false},
		{write(filepath.Join(gitDir, "worktrees", "wt", "gitdir"), "x"), false, "", false},
		{filepath.Join(ws, ".claude"), false, "", true},
	} {
		if got := deferred(tc.path, tc.isDirHint); got != tc.deferred {
			t.Errorf("deferred(%s) = %v, want %v", tc.path, got, tc.deferred)
		}
		if !tc.deferred {
			continue
		}
		why, bad := suspicious(c, tc.path, false)
		if bad != (tc.wantWhy != "") || !strings.Contains(why, tc.wantWhy) {
			t.Errorf("suspicious(%s) = %q, %v; want %q", tc.path, why, bad, tc.wantWhy)
		}
	}
	// A commondir naming another repository is suspicious.
	p := write(filepath.Join(gitDir, "worktrees", "wt", "commondir"), "/somewhere/else\n")
	if why, bad := suspicious(c, p, false); !bad || !strings.Contains(why, "/somewhere/else") {
		t.Errorf("commondir elsewhere: %q, %v", why, bad)
	}
}

// TestMoveRefusesSymlinkedParent: a session that replaces a directory on
// the way with a symlink cannot make the supervisor move what the link
// points at.
func TestMoveRefusesSymlinkedParent(t *testing.T) {
	ws, outside, qdir := t.TempDir(), t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, ".claude")
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "sub")); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	w := &Watch{opts: Options{Session: "s-test"}, dir: qdir}
	if _, err := w.moveOut(root{path: ws, fd: fd}, filepath.Join(ws, "sub", ".claude")); err == nil {
		t.Fatal("moveOut followed a symlinked parent")
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("%s was moved: %v", victim, err)
	}
	// The same entry below a real directory moves, twice under one name.
	for i, want := range []string{"", ".1"} {
		if err := os.Mkdir(filepath.Join(ws, ".claude"), 0o755); err != nil {
			t.Fatal(err)
		}
		to, err := w.moveOut(root{path: ws, fd: fd}, filepath.Join(ws, ".claude"))
		if err != nil || to != filepath.Join(qdir, "s-test", ws, ".claude")+want {
			t.Errorf("move %d: to %q, %v", i, to, err)
		}
	}
}
