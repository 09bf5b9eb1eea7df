//go:build linux

package landlock

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/launcher"
	"github.com/openoxide/oxsupervise/policy"
)

// The test binary doubles as the child (testutil.RunOp): "mount PLAN
// PROBES" applies a MountPlan (JSON) in its own mount namespace and reports
// what it could do afterwards (PROBES: one "op path" a line).
var ops = map[string]testutil.Op{
	"mount": func(a []string) int { return mountChild(a[0], a[1]) },
}

func TestMain(m *testing.M) {
	testutil.RunOp(ops)
	os.Exit(m.Run())
}

func mountChild(planJSON, probes string) int {
	var p launcher.MountPlan
	if err := json.Unmarshal([]byte(planJSON), &p); err != nil {
		fmt.Println("decode:", err)
		return 1
	}
	if err := p.Apply(); err != nil {
		fmt.Println("APPLY-ERROR:", err)
		return 0
	}
	for _, probe := range strings.Split(probes, "\n") {
		op, path, _ := strings.Cut(probe, " ")
		var err error
		switch op {
		case "write":
			err = os.WriteFile(path, []byte("x"), 0o644)
		case "append":
			var f *os.File
			if f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				f.Close()
			}
		case "rename":
			err = os.Rename(path, path+".moved")
		case "chmod":
			err = unix.Chmod(path, 0o777)
		case "chown":
			err = unix.Chown(path, 65534, 65534)
		case "utimes":
			err = unix.UtimesNano(path, []unix.Timespec{{Sec: 1}, {Sec: 1}})
		case "mkdir":
			err = unix.Mkdir(path, 0o755)
		case "connect":
			var fd int
			if fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
				err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
				unix.Close(fd)
			}
		case "read":
			var b []byte
			b, err = os.ReadFile(path)
			if err == nil {
				fmt.Printf("%s=content:%q\n", probe, b)
				continue
			}
		default:
			continue
		}
		var errno syscall.Errno
		switch {
		case err == nil:
			fmt.Printf("%s=OK\n", probe)
		case asErrno(err, &errno):
			fmt.Printf("%s=%s\n", probe, unix.ErrnoName(errno))
		default:
			fmt.Printf("%s=%v\n", probe, err)
		}
	}
	return 0
}

func asErrno(err error, out *syscall.Errno) bool {
	for err != nil {
		if e, ok := err.(syscall.Errno); ok {
			*out = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// applyInChild runs Apply in a child born in a new mount namespace.
func applyInChild(t *testing.T, p launcher.MountPlan, probes []string) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mount namespaces and mounts")
	}
	var extra []*os.File
	if p.PrivateShm {
		// As run does: the tmpfs is made here and moved by the child.
		shm, err := launcher.NewPrivateShm(p.ShmReadOnly)
		if err != nil {
			t.Fatal(err)
		}
		defer shm.Close()
		extra = append(extra, shm)
		p.ShmFD = 3
	}
	b, _ := json.Marshal(p)
	cmd := testutil.OpCommand("mount", string(b), strings.Join(probes, "\n"))
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "APPLY-ERROR: "); ok {
			got["apply"] = rest
		} else if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	return got
}

func mountsMentioning(t *testing.T, s string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), s)
}

func gitWorkspace(t *testing.T) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{".git/config": "[core]\n", ".env": "SECRET\n", "file": "f\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func TestMountPlanApply(t *testing.T) {
	ws := gitWorkspace(t)
	p := launcher.MountPlan{
		Protected: []launcher.Inode{inode(t, filepath.Join(ws, ".git/hooks")), inode(t, filepath.Join(ws, ".git/config"))},
		Pinned:    []string{filepath.Join(ws, ".git")},
		Masked:    []string{filepath.Join(ws, ".env")},
		ReadOnly:  []string{"/proc/sys"},
	}
	probes := map[string]string{
		"write " + filepath.Join(ws, ".git/hooks/pre-commit"): "EROFS",
		"append " + filepath.Join(ws, ".git/config"):          "EROFS",
		"rename " + filepath.Join(ws, ".git"):                 "EBUSY",
		"rename " + filepath.Join(ws, ".git/hooks"):           "EBUSY",
		"write " + filepath.Join(ws, ".git/index"):            "OK",
		"write " + filepath.Join(ws, "new"):                   "OK",
		"read " + filepath.Join(ws, ".env"):                   `content:""`,
		"read " + filepath.Join(ws, "file"):                   `content:"f\n"`,
		"append /proc/sys/kernel/hostname":                    "EROFS",
	}
	var list []string
	for k := range probes {
		list = append(list, k)
	}
	before := mountsMentioning(t, ws)
	got := applyInChild(t, p, list)
	if got["apply"] != "" {
		t.Fatalf("Apply: %s", got["apply"])
	}
	for probe, want := range probes {
		if got[probe] != want {
			t.Errorf("%s: got %q, want %q", probe, got[probe], want)
		}
	}
	if after := mountsMentioning(t, ws); after != before {
		t.Errorf("mounts leaked into the parent namespace: %d lines mention the workspace", after)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".env")); string(b) != "SECRET\n" {
		t.Errorf(".env changed: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git/hooks/pre-commit")); err == nil {
		t.Error("pre-commit hook was created")
	}
}

func TestMountPlanFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, ws string) launcher.MountPlan
		want    string
	}{
		{"symlink at a protected name", func(t *testing.T, ws string) launcher.MountPlan {
			a := inode(t, filepath.Join(ws, ".git/hooks"))
			os.RemoveAll(filepath.Join(ws, ".git/hooks"))
			if err := os.Symlink(t.TempDir(), filepath.Join(ws, ".git/hooks")); err != nil {
				t.Fatal(err)
			}
			return launcher.MountPlan{Protected: []launcher.Inode{a}}
		}, "replace it with the real entry: rm '"},
		{"symlinked parent", func(t *testing.T, ws string) launcher.MountPlan {
			other := filepath.Join(filepath.Dir(ws), "realgit")
			if err := os.Rename(filepath.Join(ws, ".git"), other); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
			return launcher.MountPlan{Protected: []launcher.Inode{inode(t, filepath.Join(other, "config"))}, Pinned: []string{filepath.Join(ws, ".git")}}
		}, "replace it with the real entry: rm '"},
		{"inode swapped since compile", func(t *testing.T, ws string) launcher.MountPlan {
			a := inode(t, filepath.Join(ws, ".git/config"))
			// Create the replacement first so it cannot reuse the inode.
			os.WriteFile(filepath.Join(ws, ".git/config.new"), nil, 0o644)
			if err := os.Rename(filepath.Join(ws, ".git/config.new"), filepath.Join(ws, ".git/config")); err != nil {
				t.Fatal(err)
			}
			return launcher.MountPlan{Protected: []launcher.Inode{a}}
		}, "changed since the policy was compiled"},
		{"vanished", func(t *testing.T, ws string) launcher.MountPlan {
			a := inode(t, filepath.Join(ws, ".git/config"))
			os.Remove(filepath.Join(ws, ".git/config"))
			return launcher.MountPlan{Protected: []launcher.Inode{a}}
		}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := gitWorkspace(t)
			p := tc.prepare(t, ws)
			got := applyInChild(t, p, nil)
			if !strings.Contains(got["apply"], tc.want) {
				t.Errorf("Apply error %q, want it to mention %q", got["apply"], tc.want)
			}
		})
	}
}

// listenUnix creates a listening pathname socket at p for the test's life.
func listenUnix(t *testing.T, p string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: p}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
}

// TestEscapeSocketMasks proves that well-known escape sockets (systemd,
// D-Bus, docker, agents: servers that act outside the session) are hidden
// unless listed, and that the hidden socket refuses connections.
func TestEscapeSocketMasks(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	for _, d := range []string{"user/1000/systemd", "user/1001", "docker-link"} {
		if err := os.MkdirAll(filepath.Join(run, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bus := filepath.Join(run, "user/1000/bus")
	private := filepath.Join(run, "user/1000/systemd/private")
	allowedBus := filepath.Join(run, "user/1001/bus")
	listenUnix(t, bus)
	listenUnix(t, private)
	listenUnix(t, allowedBus)
	// A regular file at a socket's name is not a socket: left alone.
	if err := os.WriteFile(filepath.Join(run, "docker.sock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A symlinked directory on the way is resolved, never followed later.
	if err := os.Symlink(filepath.Join(run, "user/1000"), filepath.Join(run, "docker-link/u")); err != nil {
		t.Fatal(err)
	}
	globs := []string{run + "/user/*/bus", run + "/user/*/systemd/private", run + "/docker.sock", run + "/docker-link/u/bus"}
	got, err := escapeSocketMasks(globs, []string{allowedBus})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{bus, private}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("masks %v, want %v", got, want)
	}

	before := mountsMentioning(t, dir)
	res := applyInChild(t, launcher.MountPlan{Masked: got}, []string{"connect " + bus, "connect " + allowedBus})
	if res["apply"] != "" {
		t.Fatalf("Apply: %s", res["apply"])
	}
	if res["connect "+bus] != "ECONNREFUSED" {
		t.Errorf("connect to the hidden %s: %q, want ECONNREFUSED", bus, res["connect "+bus])
	}
	if res["connect "+allowedBus] != "OK" {
		t.Errorf("connect to the allowed %s: %q, want OK", allowedBus, res["connect "+allowedBus])
	}
	if after := mountsMentioning(t, dir); after != before {
		t.Errorf("mounts leaked into the parent namespace")
	}
}

// TestReadOnlyView proves that outside the writable directories every
// change fails with EROFS, metadata included (Landlock has no right for
// chmod, chown or utimes), that the writable directories (nested ones
// and /dev/null too) keep working, and that the host's mounts do not
// change.
func TestReadOnlyView(t *testing.T) {
	base := t.TempDir()
	ws, inner, outside := filepath.Join(base, "ws"), filepath.Join(base, "ws", "inner"), filepath.Join(base, "outside")
	for _, d := range []string{inner, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(outside, "victim")
	own := filepath.Join(ws, "own")
	for _, f := range []string{victim, own} {
		if err := os.WriteFile(f, []byte("v\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var before unix.Stat_t
	if err := unix.Stat(victim, &before); err != nil {
		t.Fatal(err)
	}
	probes := map[string]string{
		"chmod " + victim:                      "EROFS",
		"chown " + victim:                      "EROFS",
		"utimes " + victim:                     "EROFS",
		"append " + victim:                     "EROFS",
		"rename " + victim:                     "EROFS",
		"write " + filepath.Join(outside, "n"): "EROFS",
		"mkdir " + filepath.Join(outside, "d"): "EROFS",
		"append /proc/self/oom_score_adj":      "EROFS",
		"chmod " + own:                         "OK",
		"utimes " + own:                        "OK",
		"write " + filepath.Join(ws, "n"):      "OK",
		"write " + filepath.Join(inner, "n"):   "OK",
		"append /dev/null":                     "OK",
		"read " + victim:                       `content:"v\n"`,
	}
	var list []string
	for k := range probes {
		list = append(list, k)
	}
	hostMounts := mountsMentioning(t, " / ")
	got := applyInChild(t, launcher.MountPlan{ReadOnlyView: true, Writable: []string{inner, ws}}, list)
	if got["apply"] != "" {
		t.Fatalf("Apply: %s", got["apply"])
	}
	for probe, want := range probes {
		if got[probe] != want {
			t.Errorf("%s: got %q, want %q", probe, got[probe], want)
		}
	}
	var after unix.Stat_t
	if err := unix.Stat(victim, &after); err != nil {
		t.Fatal(err)
	}
	if after.Mode != before.Mode || after.Uid != before.Uid || after.Mtim != before.Mtim {
		t.Errorf("victim's metadata changed: mode %o uid %d mtime %v, was %o %d %v", after.Mode, after.Uid, after.Mtim, before.Mode, before.Uid, before.Mtim)
	}
	for _, p := range []string{filepath.Join(outside, "n"), filepath.Join(outside, "d"), victim + ".moved"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists after a refused operation", p)
		}
	}
	// The host's own root is still writable here.
	if err := os.WriteFile(filepath.Join(outside, "host-write"), nil, 0o644); err != nil {
		t.Errorf("the host's mounts became read-only: %v", err)
	}
	if n := mountsMentioning(t, " / "); n != hostMounts {
		t.Errorf("host mount table changed: %d lines mention / (was %d)", n, hostMounts)
	}
}

// TestViewWritableKeepsStateFileDirectories: a writable root that is a
// file keeps its directory writable at the mount level, so that Landlock,
// not the read-only view, refuses the temporary file its writers create
// beside it (EACCES, which they fall back on; EROFS they do not).
func TestViewWritableKeepsStateFileDirectories(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, ".claude.json")
	if err := os.WriteFile(state, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(home, "ws")
	for _, tc := range []struct {
		name  string
		roots []policy.Anchor
		want  []string
	}{
		{"directories only", []policy.Anchor{{Path: ws, Exists: true, Dir: true}}, []string{ws}},
		{"a state file", []policy.Anchor{{Path: ws, Exists: true, Dir: true}, {Path: state, Exists: true}}, []string{ws, state, home}},
		{"a missing file", []policy.Anchor{{Path: filepath.Join(home, "gone.json")}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &policy.Compiled{Mode: policy.ModeReadOnly, FilesystemRules: true, WritableRoots: tc.roots}
			if got := viewWritable(c); !slices.Equal(got, tc.want) {
				t.Fatalf("viewWritable = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPrivateShm: the session's /dev/shm is its own: the host's entries
// are not there, and what the session creates never reaches the host.
func TestPrivateShm(t *testing.T) {
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		t.Skipf("no /dev/shm directory here (%v)", err)
	}
	host := fmt.Sprintf("/dev/shm/oxs-host-%d", os.Getpid())
	if err := os.WriteFile(host, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(host) })
	inside := fmt.Sprintf("/dev/shm/oxs-session-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(inside) })
	for _, tc := range []struct {
		readOnly bool
		write    string
	}{{false, "OK"}, {true, "EROFS"}} {
		got := applyInChild(t, launcher.MountPlan{PrivateShm: true, ShmReadOnly: tc.readOnly}, []string{"read " + host, "write " + inside})
		if got["apply"] != "" {
			t.Fatalf("Apply: %s", got["apply"])
		}
		if got["read "+host] != "ENOENT" {
			t.Errorf("read-only %v: the host's %s inside the session: %q, want ENOENT", tc.readOnly, host, got["read "+host])
		}
		if got["write "+inside] != tc.write {
			t.Errorf("read-only %v: write %s: %q, want %s", tc.readOnly, inside, got["write "+inside], tc.write)
		}
		if _, err := os.Stat(inside); err == nil {
			t.Errorf("%s, created in the session, is on the host", inside)
		}
	}
}

// TestGlobMatchesWithCache: the deny-read glob finds the same entries with
// the scan cache as without, including one created since the last start in
// a remembered directory whose times were then set back.
func TestGlobMatchesWithCache(t *testing.T) {
	ws := t.TempDir()
	for _, f := range []string{".env", ".env.example", "sub/.env.local", ".git/.env", "sub/deep/x.go"} {
		p := filepath.Join(ws, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	g := policy.NameGlob{Within: ws, Include: ".env*", Exclude: []string{".env.example"}}
	want := []string{filepath.Join(ws, ".env"), filepath.Join(ws, "sub", ".env.local")}
	time.Sleep(1100 * time.Millisecond) // past treescan's racy window, so the first scan is remembered
	for i := range 2 {
		got, err := globMatches(g, 1000, cache)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("scan %d: %v, %v; want %v", i, got, err, want)
		}
	}
	p := filepath.Join(ws, "sub", "deep", ".env.new")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Dir(p), old, old); err != nil {
		t.Fatal(err)
	}
	got, err := globMatches(g, 1000, cache)
	if want := append(want, p); err != nil || !slices.Equal(got, want) {
		t.Fatalf("after a new .env: %v, %v; want %v", got, err, want)
	}
	if _, err := globMatches(g, 3, ""); err == nil || !strings.Contains(err.Error(), "more than 3 entries") {
		t.Fatalf("limit: err = %v", err)
	}
}

// inode is p with its identity now, as PlanMounts puts a protected path
// in the plan.
func inode(t *testing.T, p string) launcher.Inode {
	a := anchor(t, p)
	return launcher.Inode{Path: a.Path, Dev: a.Dev, Ino: a.Ino}
}
