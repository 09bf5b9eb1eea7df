//go:build linux

package quarantine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
)

// TestSuspicious: what the check at a session's end keeps and moves of
// the CheckedAtEnd entries (.git files, worktree commondirs) a session
// made, read the way Close reads them.
func TestSuspicious(t *testing.T) {
	ws := t.TempDir()
	gitDir := filepath.Join(ws, ".git")
	for _, d := range []string{filepath.Join(gitDir, "worktrees", "wt"), filepath.Join(gitDir, "modules", "a", "modules", "b", "modules", "c"),
		filepath.Join(ws, "wt"), filepath.Join(ws, "sub"), filepath.Join(ws, "deep"), filepath.Join(ws, "fifo"), filepath.Join(ws, "link"), filepath.Join(ws, "empty")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &policy.Compiled{
		WritableRoots:     []policy.Anchor{{Path: ws, Exists: true, Dir: true}},
		ProtectedPaths:    []policy.Anchor{{Path: filepath.Join(gitDir, "config"), Exists: true}},
		ProtectedPatterns: testPatterns(t),
	}
	write := func(p, s string) string {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(ws, "fifo", ".git")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(ws, "link", ".git")
	if err := os.Symlink(filepath.Join(ws, "wt", ".git"), link); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	w := &Watch{c: c, roots: []root{{path: ws, fd: fd}}}
	for _, tc := range []struct {
		path    string
		wantWhy string // "" = kept
	}{
		{write(filepath.Join(ws, "wt", ".git"), "gitdir: "+filepath.Join(gitDir, "worktrees", "wt")+"\n"), ""},
		{write(filepath.Join(ws, "sub", ".git"), "gitdir: ../.git/modules/sub\n"), ""},
		{write(filepath.Join(ws, "sub", "x.git"), "gitdir: ../../elsewhere\n"), "not below an existing repository"},
		{write(filepath.Join(ws, "deep", ".git"), "gitdir: "+filepath.Join(gitDir, "modules", "a", "modules", "b", "modules", "c")+"\n"), "whose config no protected pattern covers"},
		{write(filepath.Join(ws, "empty", ".git"), ""), "without a gitdir: line"},
		{write(filepath.Join(gitDir, "worktrees", "wt", "commondir"), "../..\n"), ""},
		{fifo, "not a regular file"},
		{link, "not a regular file"},
	} {
		content, err := w.readDeferred(tc.path)
		why, bad := suspicious(c, tc.path, content, err)
		if bad != (tc.wantWhy != "") || !strings.Contains(why, tc.wantWhy) {
			t.Errorf("suspicious(%s) = %q, %v; want %q", tc.path, why, bad, tc.wantWhy)
		}
	}
	// A commondir naming another repository is suspicious.
	p := write(filepath.Join(gitDir, "worktrees", "wt", "commondir"), "/somewhere/else\n")
	content, err := w.readDeferred(p)
	if why, bad := suspicious(c, p, content, err); !bad || !strings.Contains(why, "/somewhere/else") {
		t.Errorf("commondir elsewhere: %q, %v", why, bad)
	}
	// Reached only through a symlinked directory, an entry is not there.
	if err := os.Symlink(filepath.Join(ws, "wt"), filepath.Join(ws, "alias")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.readDeferred(filepath.Join(ws, "alias", ".git")); !errors.Is(err, errNotThere) {
		t.Errorf("read through a symlinked directory: %v, want errNotThere", err)
	}
}

// testPatterns is the default protected set (protect_git = "escalation").
func testPatterns(t *testing.T) []policy.ProtectedPattern {
	c, _, err := policy.Load(policy.LoadOptions{ManagedDir: t.TempDir(), Home: t.TempDir(), Workspace: t.TempDir(), Env: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	return c.ProtectedPatterns
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
