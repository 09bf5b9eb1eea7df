//go:build linux

package fsguard_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

func TestTwoSessionsAreConfinedToTheirOwnWorkspace(t *testing.T) {
	g := loadGuard(t)
	ev := collectEvents(t, g)
	wsA, wsB := realTempDir(t), realTempDir(t)
	a, b := testutil.NewCgroup(t), testutil.NewCgroup(t)
	for _, ws := range []string{wsA, wsB} {
		writeFile(t, filepath.Join(ws, "f"), "orig")
	}
	if err := g.AddSession(a.ID, workspacePolicy(t, wsA, nil, nil)); err != nil {
		t.Fatalf("AddSession(a): %v", err)
	}
	if err := g.AddSession(b.ID, workspacePolicy(t, wsB, nil, nil)); err != nil {
		t.Fatalf("AddSession(b): %v", err)
	}
	if err := g.AddSession(a.ID, workspacePolicy(t, wsA, nil, nil)); err == nil {
		t.Fatalf("AddSession twice for cgroup %d succeeded, want an error", a.ID)
	}

	tests := []struct {
		name string
		cg   *testutil.Cgroup
		path string
		want syscall.Errno
	}{
		{"a in a", &a, filepath.Join(wsA, "f"), 0},
		{"b in b", &b, filepath.Join(wsB, "f"), 0},
		{"a in b", &a, filepath.Join(wsB, "f"), unix.EACCES},
		{"b in a", &b, filepath.Join(wsA, "f"), unix.EACCES},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := content(tt.path)
			if got := inCgroup(t, tt.cg, "write", tt.path, tt.name); got != tt.want {
				t.Fatalf("write %s: errno %v, want %v", tt.path, got, tt.want)
			}
			want := tt.name
			if tt.want != 0 {
				want = before
				e := ev.waitFor(t, tt.cg.ID, fsguard.OpOpenWrite, tt.path)
				if e.CgroupID != tt.cg.ID || e.Kind != fsguard.KindOutside {
					t.Fatalf("event %+v: want cgroup %d, kind %v", e, tt.cg.ID, fsguard.KindOutside)
				}
			}
			checkContent(t, tt.path, want)
		})
	}

	// Removing a session lifts its rules and only its rules.
	if err := g.RemoveSession(a.ID); err != nil {
		t.Fatalf("RemoveSession(a): %v", err)
	}
	if got := inCgroup(t, &a, "write", filepath.Join(wsB, "f"), "after"); got != 0 {
		t.Fatalf("after RemoveSession(a), a writing into b: errno %v, want success", got)
	}
	checkContent(t, filepath.Join(wsB, "f"), "after")
	if got := inCgroup(t, &b, "write", filepath.Join(wsA, "f"), "x"); got != unix.EACCES {
		t.Fatalf("after RemoveSession(a), b writing into a: errno %v, want EACCES", got)
	}
	if err := g.RemoveSession(b.ID); err != nil {
		t.Fatalf("RemoveSession(b): %v", err)
	}
	if err := g.RemoveSession(b.ID); err == nil {
		t.Fatal("RemoveSession of a removed session succeeded, want an error")
	}
}

// A bind mount shows a protected directory at a second path; the inode's
// ancestry is unchanged, so the protection holds there too.
func TestBindMountAliasKeepsProtection(t *testing.T) {
	g := loadGuard(t)
	ev := collectEvents(t, g)
	ws, out := realTempDir(t), realTempDir(t)
	cg := testutil.NewCgroup(t)
	writeFile(t, filepath.Join(ws, ".git/hooks/pre-commit"), "orig")
	writeFile(t, filepath.Join(ws, "src/main.go"), "orig")
	hooksAlias, wsAlias := filepath.Join(out, "hooks"), filepath.Join(out, "ws")
	mkdirAll(t, hooksAlias)
	mkdirAll(t, wsAlias)
	for src, dst := range map[string]string{filepath.Join(ws, ".git/hooks"): hooksAlias, ws: wsAlias} {
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			testutil.SkipUnlessVM(t, "bind mount %s on %s: %v", src, dst, err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(dst, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dst, err)
			}
		})
	}
	if err := g.AddSession(cg.ID, workspacePolicy(t, ws, nil, nil)); err != nil {
		t.Fatalf("AddSession: %v", err)
	}
	t.Cleanup(func() { g.RemoveSession(cg.ID) })

	if got := inCgroup(t, &cg, "write", filepath.Join(hooksAlias, "pre-commit"), "evil"); got != unix.EACCES {
		t.Fatalf("write hook through bind mount alias: errno %v, want EACCES", got)
	}
	checkContent(t, filepath.Join(ws, ".git/hooks/pre-commit"), "orig")
	e := ev.waitFor(t, cg.ID, fsguard.OpOpenWrite, filepath.Join(ws, ".git/hooks/pre-commit"))
	if e.Kind != fsguard.KindPattern || !strings.Contains(e.Rule, ".git/hooks") {
		t.Fatalf("event %+v: want the .git/hooks pattern", e)
	}
	if got := inCgroup(t, &cg, "create", filepath.Join(hooksAlias, "post-checkout")); got != unix.EACCES {
		t.Fatalf("create hook through bind mount alias: errno %v, want EACCES", got)
	}
	// The workspace itself through an alias stays writable.
	if got := inCgroup(t, &cg, "write", filepath.Join(wsAlias, "src/main.go"), "new"); got != 0 {
		t.Fatalf("write workspace file through its bind mount alias: errno %v, want success", got)
	}
	checkContent(t, filepath.Join(ws, "src/main.go"), "new")
}

// Normal work: git add and commit inside the workspace (escalation mode:
// objects, refs and index writable, hooks and config not).
func TestGitCommitInsideSession(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("SKIPPED, NOT PASSED: git not installed: %v", err)
	}
	g := loadGuard(t)
	ws := realTempDir(t)
	cg := testutil.NewCgroup(t)
	repo := filepath.Join(ws, "repo")
	env := append(os.Environ(), "HOME="+ws, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	git := func(cg *testutil.Cgroup, args ...string) (string, error) {
		cmd := exec.Command(gitPath, append([]string{"-C", repo}, args...)...)
		cmd.Env = env
		if cg != nil {
			fd := openCgroup(t, cg)
			defer unix.Close(fd)
			cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	mkdirAll(t, repo)
	// The repository exists before the session (its hooks/ and config are
	// protected by name, so a session cannot create them).
	if out, err := git(nil, "init", "-q"); err != nil {
		t.Fatalf("git init before the session: %v\n%s", err, out)
	}
	if err := g.AddSession(cg.ID, workspacePolicy(t, ws, nil, nil)); err != nil {
		t.Fatalf("AddSession: %v", err)
	}
	t.Cleanup(func() { g.RemoveSession(cg.ID) })

	writeFile(t, filepath.Join(repo, "main.go"), "package main\n")
	for _, args := range [][]string{{"add", "main.go"}, {"commit", "-q", "-m", "first"}, {"status", "--short"}} {
		if out, err := git(&cg, args...); err != nil {
			t.Fatalf("git %v inside the session: %v\n%s", args, err, out)
		}
	}
	out, err := git(nil, "log", "--format=%s")
	if err != nil || strings.TrimSpace(out) != "first" {
		t.Fatalf("git log after the session's commit = %q, %v; want the commit \"first\"", out, err)
	}
	// And the session cannot plant a hook through git itself.
	if out, err := git(&cg, "config", "core.hooksPath", "/tmp"); err == nil {
		t.Fatalf("git config inside the session succeeded, want a refusal to write .git/config\n%s", out)
	}
	if got := inCgroup(t, &cg, "create", filepath.Join(repo, ".git/hooks/pre-commit")); got != unix.EACCES {
		t.Fatalf("create .git/hooks/pre-commit inside the session: errno %v, want EACCES", got)
	}
}
