//go:build linux

package fsguard_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/policy"
)

// events collects the guard's refusals in the background.
type events struct {
	ch chan fsguard.Event
}

// collectEvents returns the shared guard's event stream. Events of
// earlier tests may still be queued; waitFor skips what it does not want.
func collectEvents(t *testing.T, g *fsguard.Guard) *events {
	return &events{ch: shared.events}
}

// waitFor returns the first event for path and op, failing after a
// timeout; events for other entries are skipped.
func (e *events) waitFor(t *testing.T, cgroupID uint64, op fsguard.Op, path string) fsguard.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var seen []string
	for {
		select {
		case ev, ok := <-e.ch:
			if !ok {
				t.Fatalf("event stream closed while waiting for %s %s", op, path)
			}
			if ev.CgroupID == cgroupID && ev.Op == op && ev.Path == path {
				return ev
			}
			seen = append(seen, fmt.Sprintf("cgroup %d: %s %s", ev.CgroupID, ev.Op, ev.Path))
		case <-deadline:
			t.Fatalf("no %s event for %s; other events: %v", op, path, seen)
		}
	}
}

// drain returns the events that arrive until the stream is quiet.
func (e *events) drain() []fsguard.Event {
	var out []fsguard.Event
	for {
		select {
		case ev := <-e.ch:
			out = append(out, ev)
		case <-time.After(500 * time.Millisecond):
			return out
		}
	}
}

func anchorOf(t testing.TB, path string) policy.Anchor {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatalf("stat anchor %s: %v", path, err)
	}
	return policy.Anchor{Path: path, Dev: st.Dev, Ino: st.Ino, Dir: st.Mode&unix.S_IFMT == unix.S_IFDIR, Exists: true, Source: "test"}
}

// testPatterns is a representative part of the default protected set
// (escalation mode).
var testPatterns = []policy.ProtectedPattern{
	{Components: []string{".git"}, Type: policy.EntryFile, Source: "test"},
	{Components: []string{".git", "hooks"}, Type: policy.EntryAny, Source: "test"},
	{Components: []string{".git", "config"}, Type: policy.EntryAny, Source: "test"},
	{Components: []string{".git", "modules", "*", "hooks"}, Type: policy.EntryAny, Source: "test"},
	{Components: []string{".codex"}, Type: policy.EntryAny, Source: "test"},
	{Components: []string{".claude"}, Type: policy.EntryAny, Source: "test"},
	{Components: []string{"AGENTS.md"}, Type: policy.EntryAny, Source: "test"},
}

func workspacePolicy(t testing.TB, ws string, protected, denyRead []string) *policy.Compiled {
	c := &policy.Compiled{
		Mode:              policy.ModeWorkspaceWrite,
		FilesystemRules:   true,
		Workspace:         anchorOf(t, ws),
		WritableRoots:     []policy.Anchor{anchorOf(t, ws)},
		ProtectedPatterns: testPatterns,
	}
	for _, p := range protected {
		c.ProtectedPaths = append(c.ProtectedPaths, anchorOf(t, p))
	}
	for _, p := range denyRead {
		c.DenyRead = append(c.DenyRead, anchorOf(t, p))
	}
	return c
}

// inCgroup runs the helper op in cgroup cg (nil: the test's own cgroup)
// and returns its errno.
func inCgroup(t *testing.T, cg *testutil.Cgroup, op string, args ...string) syscall.Errno {
	t.Helper()
	return inCgroupTB(t, cg, op, args...)
}

func inCgroupTB(t testing.TB, cg *testutil.Cgroup, op string, args ...string) syscall.Errno {
	t.Helper()
	return inCgroupExe(t, os.Args[0], cg, op, args...)
}

// inCgroupExe is inCgroup with the helper run from exe, a copy of the
// test binary (static: it needs no other file to start).
func inCgroupExe(t testing.TB, exe string, cg *testutil.Cgroup, op string, args ...string) syscall.Errno {
	t.Helper()
	cmd := exec.Command(exe, fsArgs(op, args...)...)
	cmd.Stderr = os.Stderr
	if cg != nil {
		fd := openCgroup(t, cg)
		defer unix.Close(fd)
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s %v: %v", op, args, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("helper %s printed %q: %v", op, out, err)
	}
	return syscall.Errno(n)
}

func openCgroup(t testing.TB, cg *testutil.Cgroup) int {
	t.Helper()
	fd, err := unix.Open(cg.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open cgroup %s: %v", cg.Dir, err)
	}
	return fd
}

func realTempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdirAll(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func content(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// denial is the event a refused case must produce.
type denial struct {
	op   fsguard.Op
	path string
	kind fsguard.Kind
}

func TestEnforcement(t *testing.T) {
	g := loadGuard(t)
	ev := collectEvents(t, g)
	ws, out := realTempDir(t), realTempDir(t)
	session := testutil.NewCgroup(t)
	bystander := testutil.NewCgroup(t)

	// The world before the session: made by the test, which no rule binds.
	for _, f := range []string{"f", "trunc", "unl", "chm", "cho", "xat", "uti", "ren", "ex1", "ex2", ".git/hooks/pre-commit", ".git/config", ".git/HEAD", "sub/repo/.git/hooks/h", "secrets/key"} {
		writeFile(t, filepath.Join(ws, f), "orig")
	}
	for _, f := range []string{"f", "unl", "ren"} {
		writeFile(t, filepath.Join(out, f), "orig")
	}
	mkdirAll(t, filepath.Join(ws, "rmd"))
	mkdirAll(t, filepath.Join(ws, "fresh"))
	mkdirAll(t, filepath.Join(out, "rmd"))
	mkdirAll(t, filepath.Join(ws, "sub/deep"))
	mkdirAll(t, filepath.Join(ws, "mvgit/x"))
	mkdirAll(t, filepath.Join(ws, "mvgit/.git/hooks"))
	// A hard link of a protected file, made before the session started.
	if err := os.Link(filepath.Join(ws, ".git/config"), filepath.Join(ws, "config-alias")); err != nil {
		t.Fatal(err)
	}
	deep := ws
	for i := 0; i < 70; i++ {
		deep = filepath.Join(deep, "d")
	}
	mkdirAll(t, deep)
	tooDeep := deep
	for i := 70; i < 520; i++ {
		tooDeep = filepath.Join(tooDeep, "d")
	}
	mkdirAll(t, tooDeep)
	// Names long enough that the event's path (1 KiB) holds only the
	// nearest four of five.
	var long [5]string
	longDir := out
	for i := range long {
		long[i] = fmt.Sprintf("%d%s", i, strings.Repeat("n", 249))
		longDir = filepath.Join(longDir, long[i])
	}
	mkdirAll(t, longDir)

	c := workspacePolicy(t, ws, []string{filepath.Join(ws, ".git/config")}, []string{filepath.Join(ws, "secrets")})
	if err := g.AddSession(session.ID, c); err != nil {
		t.Fatalf("AddSession: %v", err)
	}
	t.Cleanup(func() {
		if err := g.RemoveSession(session.ID); err != nil {
			t.Errorf("RemoveSession: %v", err)
		}
	})

	W := func(p string) string { return filepath.Join(ws, p) }
	O := func(p string) string { return filepath.Join(out, p) }
	tests := []struct {
		name  string
		op    string
		args  []string
		want  syscall.Errno
		deny  *denial
		after func(t *testing.T)
	}{
		{"write inside workspace", "write", []string{W("f"), "new"}, 0, nil,
			func(t *testing.T) { checkContent(t, W("f"), "new") }},
		{"write outside", "write", []string{O("f"), "new"}, unix.EACCES, &denial{fsguard.OpOpenWrite, O("f"), fsguard.KindOutside},
			func(t *testing.T) { checkContent(t, O("f"), "orig") }},
		{"write protected hook", "write", []string{W(".git/hooks/pre-commit"), "evil"}, unix.EACCES, &denial{fsguard.OpOpenWrite, W(".git/hooks/pre-commit"), fsguard.KindPattern},
			func(t *testing.T) { checkContent(t, W(".git/hooks/pre-commit"), "orig") }},
		{"write nested repository hook", "write", []string{W("sub/repo/.git/hooks/h"), "evil"}, unix.EACCES, &denial{fsguard.OpOpenWrite, W("sub/repo/.git/hooks/h"), fsguard.KindPattern},
			func(t *testing.T) { checkContent(t, W("sub/repo/.git/hooks/h"), "orig") }},
		{"write .git/HEAD in escalation mode", "write", []string{W(".git/HEAD"), "ref"}, 0, nil,
			func(t *testing.T) { checkContent(t, W(".git/HEAD"), "ref") }},
		{"write through hard link of protected file", "write", []string{W("config-alias"), "evil"}, unix.EACCES, &denial{fsguard.OpOpenWrite, W("config-alias"), fsguard.KindProtected},
			func(t *testing.T) { checkContent(t, W(".git/config"), "orig") }},
		{"create inside", "create", []string{W("new")}, 0, nil, wantExists(W("new"), true)},
		{"create outside", "create", []string{O("new")}, unix.EACCES, &denial{fsguard.OpMknod, O("new"), fsguard.KindOutside}, wantExists(O("new"), false)},
		{"first-time mkdir .codex", "mkdir", []string{W(".codex")}, unix.EACCES, &denial{fsguard.OpMkdir, W(".codex"), fsguard.KindPattern}, wantExists(W(".codex"), false)},
		{"create nested .claude", "mkdir", []string{W("sub/deep/.claude")}, unix.EACCES, &denial{fsguard.OpMkdir, W("sub/deep/.claude"), fsguard.KindPattern}, wantExists(W("sub/deep/.claude"), false)},
		{"create AGENTS.md", "create", []string{W("AGENTS.md")}, unix.EACCES, &denial{fsguard.OpMknod, W("AGENTS.md"), fsguard.KindPattern}, wantExists(W("AGENTS.md"), false)},
		{"new hooks in fresh repository", "mkdirp-write", []string{W("fresh/.git"), "x"}, 0, nil, wantExists(W("fresh/.git/x"), true)},
		{"mkdir hooks in fresh repository", "mkdir", []string{W("fresh/.git/hooks")}, unix.EACCES, &denial{fsguard.OpMkdir, W("fresh/.git/hooks"), fsguard.KindPattern}, wantExists(W("fresh/.git/hooks"), false)},
		{"O_TRUNC outside", "otrunc", []string{O("f")}, unix.EACCES, &denial{fsguard.OpOpenWrite, O("f"), fsguard.KindOutside},
			func(t *testing.T) { checkContent(t, O("f"), "orig") }},
		{"truncate outside", "truncate", []string{O("f")}, unix.EACCES, &denial{fsguard.OpTruncate, O("f"), fsguard.KindOutside},
			func(t *testing.T) { checkContent(t, O("f"), "orig") }},
		{"truncate inside", "truncate", []string{W("trunc")}, 0, nil, func(t *testing.T) { checkContent(t, W("trunc"), "") }},
		{"ftruncate inside", "ftruncate", []string{W("f")}, 0, nil, func(t *testing.T) { checkContent(t, W("f"), "") }},
		{"unlink inside", "unlink", []string{W("unl")}, 0, nil, wantExists(W("unl"), false)},
		{"unlink outside", "unlink", []string{O("unl")}, unix.EACCES, &denial{fsguard.OpUnlink, O("unl"), fsguard.KindOutside}, wantExists(O("unl"), true)},
		{"unlink protected config", "unlink", []string{W(".git/config")}, unix.EACCES, &denial{fsguard.OpUnlink, W(".git/config"), fsguard.KindProtected}, wantExists(W(".git/config"), true)},
		{"rmdir inside", "rmdir", []string{W("rmd")}, 0, nil, wantExists(W("rmd"), false)},
		{"rmdir outside", "rmdir", []string{O("rmd")}, unix.EACCES, &denial{fsguard.OpRmdir, O("rmd"), fsguard.KindOutside}, wantExists(O("rmd"), true)},
		{"mkdir outside", "mkdir", []string{O("md")}, unix.EACCES, &denial{fsguard.OpMkdir, O("md"), fsguard.KindOutside}, wantExists(O("md"), false)},
		{"mknod device inside", "mknod-null", []string{W("null")}, 0, nil, wantExists(W("null"), true)},
		{"mknod device outside", "mknod-null", []string{O("null")}, unix.EACCES, &denial{fsguard.OpMknod, O("null"), fsguard.KindOutside}, wantExists(O("null"), false)},
		{"mkfifo outside", "mkfifo", []string{O("fifo")}, unix.EACCES, &denial{fsguard.OpMknod, O("fifo"), fsguard.KindOutside}, wantExists(O("fifo"), false)},
		{"symlink out of the workspace", "symlink", []string{O("f"), W("to-out")}, 0, nil, wantExists(W("to-out"), true)},
		{"write through symlink out of the workspace", "write", []string{W("to-out"), "evil"}, unix.EACCES, &denial{fsguard.OpOpenWrite, O("f"), fsguard.KindOutside},
			func(t *testing.T) { checkContent(t, O("f"), "orig") }},
		{"symlink outside", "symlink", []string{"x", O("lnk")}, unix.EACCES, &denial{fsguard.OpSymlink, O("lnk"), fsguard.KindOutside}, wantExists(O("lnk"), false)},
		{"link inside", "link", []string{W("chm"), W("chm-link")}, 0, nil, wantExists(W("chm-link"), true)},
		{"link from outside", "link", []string{O("f"), W("stolen")}, unix.EACCES, &denial{fsguard.OpLinkSource, O("f"), fsguard.KindOutside}, wantExists(W("stolen"), false)},
		{"link of protected file", "link", []string{W(".git/hooks/pre-commit"), W("hook-alias")}, unix.EACCES, &denial{fsguard.OpLinkSource, W(".git/hooks/pre-commit"), fsguard.KindPattern}, wantExists(W("hook-alias"), false)},
		{"link to outside", "link", []string{W("chm"), O("l")}, unix.EACCES, &denial{fsguard.OpLink, O("l"), fsguard.KindOutside}, wantExists(O("l"), false)},
		{"rename inside", "rename", []string{W("ren"), W("ren2")}, 0, nil, wantExists(W("ren2"), true)},
		{"rename out of workspace", "rename", []string{W("ren2"), O("ren2")}, unix.EACCES, &denial{fsguard.OpRenameTarget, O("ren2"), fsguard.KindOutside}, wantExists(W("ren2"), true)},
		{"rename into workspace", "rename", []string{O("ren"), W("ren3")}, unix.EACCES, &denial{fsguard.OpRenameSource, O("ren"), fsguard.KindOutside}, wantExists(O("ren"), true)},
		{"mv .git x", "rename", []string{W("mvgit/.git"), W("mvgit/y")}, unix.EACCES, &denial{fsguard.OpRenameSource, W("mvgit/.git"), fsguard.KindPattern}, wantExists(W("mvgit/.git/hooks"), true)},
		{"mv x .git", "rename", []string{W("mvgit/x"), W("sub/.git")}, unix.EACCES, &denial{fsguard.OpRenameTarget, W("sub/.git"), fsguard.KindPattern}, wantExists(W("mvgit/x"), true)},
		{"RENAME_EXCHANGE with outside", "exchange", []string{W("ex1"), O("f")}, unix.EACCES, &denial{fsguard.OpRenameTarget, O("f"), fsguard.KindOutside},
			func(t *testing.T) { checkContent(t, O("f"), "orig") }},
		{"RENAME_EXCHANGE inside", "exchange", []string{W("ex1"), W("ex2")}, 0, nil, func(t *testing.T) { checkContent(t, W("ex1"), "orig") }},
		{"chmod inside", "chmod", []string{W("chm")}, 0, nil, wantMode(W("chm"), 0o600)},
		{"chmod outside", "chmod", []string{O("f")}, unix.EACCES, &denial{fsguard.OpChmod, O("f"), fsguard.KindOutside}, wantMode(O("f"), 0o644)},
		{"chown inside", "chown", []string{W("cho")}, 0, nil, wantOwner(W("cho"), 1000)},
		{"chown outside", "chown", []string{O("f")}, unix.EACCES, &denial{fsguard.OpChown, O("f"), fsguard.KindOutside}, wantOwner(O("f"), 0)},
		{"setxattr inside", "setxattr", []string{W("xat")}, 0, nil, nil},
		{"setxattr outside", "setxattr", []string{O("f")}, unix.EACCES, &denial{fsguard.OpSetxattr, O("f"), fsguard.KindOutside}, nil},
		{"utimes inside", "utimes", []string{W("uti")}, 0, nil, wantMtime(W("uti"), 1000)},
		{"utimes outside", "utimes", []string{O("f")}, unix.EACCES, &denial{fsguard.OpSetattr, O("f"), fsguard.KindOutside}, nil},
		{"read denied secret", "read", []string{W("secrets/key")}, unix.EACCES, &denial{fsguard.OpOpenRead, W("secrets/key"), fsguard.KindDenyRead}, nil},
		{"read outside", "read", []string{O("f")}, 0, nil, nil},
		{"reopen for write through /proc/self/fd", "procfd-reopen", []string{O("f"), "evil"}, unix.EACCES, &denial{fsguard.OpOpenWrite, O("f"), fsguard.KindOutside},
			func(t *testing.T) { checkContent(t, O("f"), "orig") }},
		{"write outside through a dir fd after chroot into the workspace", "chroot-write", []string{out, ws, "f"}, unix.EACCES, &denial{fsguard.OpOpenWrite, O("f"), fsguard.KindOutside},
			func(t *testing.T) { checkContent(t, O("f"), "orig") }},
		{"write 71 levels deep", "create", []string{filepath.Join(deep, "f")}, 0, nil, wantExists(filepath.Join(deep, "f"), true)},
		{"long names outside: the path keeps the nearest bytes", "create", []string{filepath.Join(longDir, "f")}, unix.EACCES,
			&denial{fsguard.OpMknod, ".../" + strings.Join(long[1:], "/") + "/f", fsguard.KindOutside}, wantExists(filepath.Join(longDir, "f"), false)},
		{"write 521 levels deep: walk bound refuses", "create", []string{filepath.Join(tooDeep, "f")}, unix.EACCES,
			&denial{fsguard.OpMknod, ".../" + strings.Repeat("d/", 63) + "f", fsguard.KindDepth}, wantExists(filepath.Join(tooDeep, "f"), false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inCgroup(t, &session, tt.op, tt.args...)
			if got != tt.want {
				t.Fatalf("%s %v in session: errno %d (%v), want %d (%v)", tt.op, tt.args, got, got, tt.want, tt.want)
			}
			if tt.after != nil {
				tt.after(t)
			}
			if tt.deny != nil {
				e := ev.waitFor(t, session.ID, tt.deny.op, tt.deny.path)
				if e.Kind != tt.deny.kind || e.CgroupID != session.ID || e.Errno != unix.EACCES || e.PID == 0 || e.Comm == "" || e.Rule == "" {
					t.Fatalf("event %+v: want kind %v, cgroup %d, EACCES, a pid, comm and rule", e, tt.deny.kind, session.ID)
				}
				t.Logf("event: op=%v kind=%v rule=%q path=%s pid=%d comm=%s depth=%d new=%v", e.Op, e.Kind, e.Rule, e.Path, e.PID, e.Comm, e.Depth, e.NewEntry)
			}
		})
	}

	// The same refused operations from outside any session succeed.
	t.Run("outside the session unaffected", func(t *testing.T) {
		if got := inCgroup(t, &bystander, "write", O("f"), "bystander"); got != 0 {
			t.Fatalf("write outside from another cgroup: errno %v", got)
		}
		checkContent(t, O("f"), "bystander")
		if got := inCgroup(t, nil, "mkdir", W(".codex")); got != 0 {
			t.Fatalf("mkdir .codex from the test's cgroup: errno %v", got)
		}
	})
	shared.ring.Drain()
	if lost := shared.lost.Load(); lost != 0 {
		t.Errorf("%d events lost; want 0", lost)
	}
	for _, e := range ev.drain() {
		if e.CgroupID == bystander.ID || e.PID == uint32(os.Getpid()) {
			t.Errorf("event for a task outside the session: %+v", e)
		}
	}
}

func wantExists(path string, want bool) func(t *testing.T) {
	return func(t *testing.T) {
		t.Helper()
		if got := exists(path); got != want {
			t.Fatalf("%s exists = %v, want %v", path, got, want)
		}
	}
}

func checkContent(t *testing.T, path, want string) {
	t.Helper()
	if got := content(path); got != want {
		t.Fatalf("%s holds %q, want %q", path, got, want)
	}
}

func wantMode(path string, want uint32) func(t *testing.T) {
	return func(t *testing.T) {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil || st.Mode&0o777 != want {
			t.Fatalf("%s mode %o (%v), want %o", path, st.Mode&0o777, err, want)
		}
	}
}

func wantOwner(path string, uid uint32) func(t *testing.T) {
	return func(t *testing.T) {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil || st.Uid != uid {
			t.Fatalf("%s owner %d (%v), want %d", path, st.Uid, err, uid)
		}
	}
}

func wantMtime(path string, sec int64) func(t *testing.T) {
	return func(t *testing.T) {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil || st.Mtim.Sec != sec {
			t.Fatalf("%s mtime %d (%v), want %d", path, st.Mtim.Sec, err, sec)
		}
	}
}
