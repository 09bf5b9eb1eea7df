//go:build linux

package session_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/procfs"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/session"
)

// bin and fsop are built once in TestMain: the tests run oxsupervise the
// way a user does.
var bin, fsop string

func TestMain(m *testing.M) {
	// The in-process tests (Run called directly) use this test binary as
	// the launcher.
	if len(os.Args) > 1 && os.Args[1] == session.LauncherVerb {
		os.Exit(session.LauncherMain())
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "session tests: not root; every test that needs root skips")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "oxs-session-bin-")
	if err != nil {
		panic(err)
	}
	// The non-root test executes fsop as another user.
	os.Chmod(dir, 0o755)
	bin = filepath.Join(dir, "oxsupervise")
	fsop = filepath.Join(dir, "fsop")
	for _, b := range [][2]string{{bin, "../cmd/oxsupervise"}, {fsop, "./testdata/fsop"}} {
		out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", b[1], err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	// The standalone runs of these tests keep their BPF programs pinned
	// for the next run (host.Cache): below a directory of their own, not
	// the machine's.
	pins, err := os.MkdirTemp("/sys/fs/bpf", "oxs-session-pins-")
	if err == nil {
		os.Setenv("OXSUPERVISE_PIN_DIR", pins)
	} else {
		os.Setenv("OXSUPERVISE_PIN_DIR", "off")
	}
	code := m.Run()
	os.RemoveAll(dir)
	if pins != "" {
		os.RemoveAll(pins)
	}
	os.Exit(code)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: run creates cgroups and mount namespaces")
	}
}

// landlockABI probes the kernel independently of the code under test.
func landlockABI(t *testing.T) int {
	t.Helper()
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		t.Skipf("Landlock unusable on this kernel (%v): the Landlock layer cannot be tested here", errno)
	}
	if v < 3 {
		t.Skipf("Landlock ABI %d < 3: run refuses filesystem rules here (covered by TestRunFailsClosed)", v)
	}
	return int(v)
}

// cgroup2Mount finds cgroup2 independently of the cgroup package.
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, fl := range fields {
			if fl == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				return fields[4]
			}
		}
	}
	t.Skip("no cgroup2 mount: sessions cannot be created here")
	return ""
}

// env is one test's scratch world: a workspace (a git repository with a
// commit), a fake home with a credential canary, and a directory outside
// every writable root. It lives below /var/tmp, not /tmp, because /tmp is
// a default writable root.
type env struct {
	base, ws, home, outside string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "oxs-session-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	e := &env{base: base, ws: filepath.Join(base, "ws"), home: filepath.Join(base, "home"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{e.ws, filepath.Join(e.home, ".ssh"), e.outside, filepath.Join(e.ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(e.home, ".ssh", "canary"), "canary-secret\n")
	mustWrite(t, filepath.Join(e.home, "notes.txt"), "readable\n")
	mustWrite(t, filepath.Join(e.outside, "victim.txt"), "victim\n")
	mustWrite(t, filepath.Join(e.ws, "file.txt"), "tracked\n")
	mustWrite(t, filepath.Join(e.ws, "sub", "inner.txt"), "inner\n")
	e.git(t, "init", "-q")
	e.git(t, "config", "user.email", "test@example.invalid")
	e.git(t, "config", "user.name", "oxsupervise test")
	return e
}

func (e *env) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = e.ws
	cmd.Env = append(os.Environ(), "HOME="+e.home, "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs `oxsupervise ARGS...` in the workspace with the fake home.
func (e *env) run(t *testing.T, extraEnv []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if len(args) > 0 && args[0] == "run" && !contains(args, "--audit-log") {
		// Keep test records out of the machine's audit log.
		args = append([]string{"run", "--audit-log", filepath.Join(e.base, "audit.jsonl")}, args[1:]...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	// A descendant holding stdout must not turn a timeout into a hang.
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = e.ws
	cmd.Env = append(os.Environ(), "HOME="+e.home, "FSOP="+fsop, "GIT_CONFIG_NOSYSTEM=1")
	cmd.Env = append(cmd.Env, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("oxsupervise %v: %v", args, err)
	}
	return r
}

// op is one filesystem operation performed inside a session and the errno
// names it may end with ("OK" for success).
type op struct {
	name string
	cmd  string // fsop arguments, shell-quoted by the test
	want []string
}

// runOps runs every op in one session and returns name -> result.
func (e *env) runOps(t *testing.T, mode string, ops []op, extra ...string) map[string]string {
	t.Helper()
	return e.runOpsWith(t, []string{"--sandbox", mode}, ops, extra...)
}

// runOpsWith is runOps with any `run` flags.
func (e *env) runOpsWith(t *testing.T, flags []string, ops []op, extra ...string) map[string]string {
	t.Helper()
	var script strings.Builder
	for _, o := range ops {
		fmt.Fprintf(&script, "printf '%%s=' %q; \"$FSOP\" %s\n", o.name, o.cmd)
	}
	script.WriteString(extraScript(extra))
	r := e.run(t, nil, append(append([]string{"run"}, flags...), "--", "sh", "-c", script.String())...)
	if r.code != 0 {
		t.Fatalf("run %v: exit %d\nstdout:\n%s\nstderr:\n%s", flags, r.code, r.stdout, r.stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	for _, o := range ops {
		g, ok := got[o.name]
		if !ok {
			t.Errorf("%s: no result in output:\n%s\nstderr:\n%s", o.name, r.stdout, r.stderr)
			continue
		}
		if !contains(o.want, g) {
			t.Errorf("%s (fsop %s): got %s, want %s", o.name, o.cmd, g, strings.Join(o.want, " or "))
		}
	}
	return got
}

func extraScript(lines []string) string {
	return strings.Join(lines, "\n")
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

var (
	ok       = []string{"OK"}
	denied   = []string{"EACCES"}
	readOnly = []string{"EROFS"}
	// A rename or link that Landlock refuses for lack of the refer right
	// fails with EXDEV (so tools fall back to copying); lacking the
	// remove/make right it fails with EACCES. Either keeps the file where
	// it was, which the test checks afterwards.
	noRefer = []string{"EXDEV", "EACCES"}
	// Outside the writable roots the Landlock path's mount namespace is
	// read-only (landlock.MountPlan.ReadOnlyView): the VFS refuses a
	// change there with EROFS before Landlock is asked.
	outsideRoots = readOnly
)

func TestRunWorkspaceWrite(t *testing.T) {
	requireRoot(t)
	abi := landlockABI(t)
	cg2 := cgroup2Mount(t)
	e := newEnv(t)
	tmpFile := filepath.Join("/tmp", fmt.Sprintf("oxs-test-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(tmpFile) })
	etcFile := fmt.Sprintf("/etc/oxs-test-%d", time.Now().UnixNano())
	victim := filepath.Join(e.outside, "victim.txt")
	ops := []op{
		{"ws-write", "write new.txt", ok},
		{"ws-subdir-mkdir", "mkdir newdir", ok},
		{"tmp-write", "write " + tmpFile, ok},
		{"devnull-write", "write /dev/null", ok},
		{"etc-write", "write " + etcFile, outsideRoots},
		{"home-write", "write " + filepath.Join(e.home, "planted"), outsideRoots},
		{"parent-write", "write ../outside.txt", outsideRoots},
		{"outside-truncate", "truncate " + victim, outsideRoots},
		{"outside-append", "append " + victim, outsideRoots},
		{"outside-unlink", "unlink " + victim, outsideRoots},
		{"home-read-canary", "read " + filepath.Join(e.home, ".ssh", "canary"), denied},
		{"home-read-notes", "read " + filepath.Join(e.home, "notes.txt"), ok},
		{"hook-create", "write .git/hooks/pre-commit", readOnly},
		{"git-config-append", "append .git/config", readOnly},
		{"git-config-truncate", "truncate .git/config", readOnly},
		{"git-config-unlink", "unlink .git/config", []string{"EBUSY"}},
		{"git-config-link", "link .git/config cfglink", []string{"EXDEV"}},
		{"git-hooks-rename", "rename .git/hooks hooks2", []string{"EBUSY", "EXDEV"}},
		{"git-dir-rename", "rename .git gitx", []string{"EBUSY"}},
		// Landlock selftest families: link, rename, reparent, exchange,
		// truncate through an alias, symlink out of the workspace.
		{"link-in", "link " + victim + " linked.txt", noRefer},
		{"rename-in", "rename " + victim + " stolen.txt", noRefer},
		{"rename-out", "rename file.txt " + filepath.Join(e.outside, "moved.txt"), noRefer},
		{"reparent-out", "rename sub " + filepath.Join(e.outside, "sub"), noRefer},
		{"exchange", "exchange file.txt " + victim, noRefer},
		{"symlink-create", "symlink " + victim + " sl", ok},
		{"symlink-write", "append sl", outsideRoots},
		{"symlink-truncate", "truncate sl", outsideRoots},
		{"mknod-outside", "mknod " + filepath.Join(e.outside, "fifo"), outsideRoots},
		{"proc-sys-write", "append /proc/sys/kernel/hostname", []string{"EROFS", "EACCES"}},
		{"cgroup-escape", "append " + filepath.Join(cg2, "cgroup.procs"), []string{"EROFS", "EACCES"}},
	}
	mustWrite(t, filepath.Join(e.ws, ".env"), "DOTENV_SECRET\n")
	mustWrite(t, filepath.Join(e.ws, "sub", ".env.local"), "DOTENV_SECRET\n")
	mustWrite(t, filepath.Join(e.ws, ".env.example"), "example\n")
	got := e.runOps(t, "workspace-write", ops,
		`if git add file.txt new.txt && git commit -qm "from session"; then echo git=OK; else echo git=FAIL; fi`,
		`printf 'dotenv='; cat .env sub/.env.local | tr -d '\n'; echo`,
		`printf 'dotenv-example='; cat .env.example`,
		// $PPID is the supervisor, outside the session's Landlock domain.
		`if kill -0 $PPID 2>/dev/null; then echo signal-supervisor=OK; else echo signal-supervisor=DENIED; fi`)
	if want := map[bool]string{true: "DENIED", false: "OK"}[abi >= 6]; got["signal-supervisor"] != want {
		t.Errorf("signalling the supervisor from the session: %s, want %s (Landlock ABI %d)", got["signal-supervisor"], want, abi)
	}
	if got["git"] != "OK" {
		t.Errorf("git add/commit inside the session failed")
	}
	// Existing .env files are hidden (empty), .env.example is not.
	if got["dotenv"] != "" || got["dotenv-example"] != "example" {
		t.Errorf(".env content seen in the session: %q; .env.example: %q", got["dotenv"], got["dotenv-example"])
	}
	if mustRead(t, filepath.Join(e.ws, ".env")) != "DOTENV_SECRET\n" {
		t.Error(".env changed on the host")
	}

	// The files the denied operations aimed at do not exist, and nothing
	// outside changed.
	for _, p := range []string{etcFile, filepath.Join(e.home, "planted"), filepath.Join(e.base, "outside.txt"),
		filepath.Join(e.ws, ".git", "hooks", "pre-commit"), filepath.Join(e.ws, "cfglink"), filepath.Join(e.ws, "linked.txt"),
		filepath.Join(e.ws, "stolen.txt"), filepath.Join(e.outside, "moved.txt"), filepath.Join(e.outside, "sub"),
		filepath.Join(e.outside, "fifo"), filepath.Join(e.ws, "gitx"), filepath.Join(e.ws, "hooks2")} {
		if exists(p) {
			t.Errorf("%s exists after a denied operation", p)
		}
	}
	if got := mustRead(t, victim); got != "victim\n" {
		t.Errorf("victim.txt changed: %q", got)
	}
	if got := mustRead(t, filepath.Join(e.ws, "file.txt")); got != "tracked\n" {
		t.Errorf("file.txt changed: %q", got)
	}
	if !exists(filepath.Join(e.ws, "new.txt")) || !exists(tmpFile) || !exists(filepath.Join(e.ws, "newdir")) {
		t.Errorf("allowed writes did not land: new.txt %v, %s %v, newdir %v",
			exists(filepath.Join(e.ws, "new.txt")), tmpFile, exists(tmpFile), exists(filepath.Join(e.ws, "newdir")))
	}
	if strings.Contains(mustRead(t, filepath.Join(e.ws, ".git", "config")), "written by fsop") {
		t.Error(".git/config was modified")
	}
	if log := e.git(t, "log", "--oneline"); !strings.Contains(log, "from session") {
		t.Errorf("git commit inside the session did not land; git log:\n%s", log)
	}
}

func TestRunDenyReadInsideWritableRoot(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	// A home inside a writable root (the workspace): Landlock cannot take
	// read access away below a granted root, so the mount layer masks it.
	home := filepath.Join(e.ws, "home")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(home, ".ssh", "canary"), "canary-secret\n")
	r := e.run(t, []string{"HOME=" + home}, "run", "--", "sh", "-c", `cat "$HOME/.ssh/canary"; echo "cat=$?"; "$FSOP" write "$HOME/.ssh/canary"`)
	if strings.Contains(r.stdout, "canary-secret") {
		t.Fatalf("canary readable inside the session:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "cat=1") {
		t.Errorf("cat of the canary did not fail: %q (stderr %q)", r.stdout, r.stderr)
	}
	if got := mustRead(t, filepath.Join(home, ".ssh", "canary")); got != "canary-secret\n" {
		t.Errorf("canary changed: %q", got)
	}
}

func TestRunReadOnly(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	tmpFile := filepath.Join("/tmp", fmt.Sprintf("oxs-test-ro-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(tmpFile) })
	ops := []op{
		{"ws-write", "write new.txt", outsideRoots},
		{"ws-append", "append file.txt", outsideRoots},
		{"ws-truncate", "truncate file.txt", outsideRoots},
		{"ws-mkdir", "mkdir d", outsideRoots},
		{"ws-unlink", "unlink file.txt", outsideRoots},
		{"ws-rename", "rename file.txt renamed.txt", outsideRoots},
		{"ws-symlink", "symlink file.txt sl", outsideRoots},
		{"ws-chmod-file-read", "read file.txt", ok},
		{"tmp-write", "write " + tmpFile, outsideRoots},
		{"home-write", "write " + filepath.Join(e.home, "x"), outsideRoots},
		{"devnull-write", "write /dev/null", ok},
		{"canary-read", "read " + filepath.Join(e.home, ".ssh", "canary"), denied},
	}
	e.runOps(t, "read-only", ops)
	for _, p := range []string{"new.txt", "d", "renamed.txt", "sl"} {
		if exists(filepath.Join(e.ws, p)) {
			t.Errorf("%s exists after read-only session", p)
		}
	}
	if exists(tmpFile) {
		t.Errorf("%s exists after read-only session", tmpFile)
	}
	if got := mustRead(t, filepath.Join(e.ws, "file.txt")); got != "tracked\n" {
		t.Errorf("file.txt changed: %q", got)
	}
}

func TestRunWithoutFilesystemRules(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		mode   string
		canary []string // reading the credential canary
	}{
		{"full-access", ok},
		// external-sandbox: no filesystem rules, but existing credential
		// directories are hidden under an empty tmpfs.
		{"external-sandbox", []string{"ENOENT"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			e := newEnv(t)
			target := filepath.Join(e.outside, tc.mode+".txt")
			ops := []op{
				{"outside-write", "write " + target, ok},
				{"canary-read", "read " + filepath.Join(e.home, ".ssh", "canary"), tc.canary},
				{"proc-sys-write", "append /proc/sys/kernel/hostname", readOnly},
			}
			got := e.runOps(t, tc.mode, ops, `printf 'canary='; cat "$HOME/.ssh/canary" 2>/dev/null; echo`)
			if !exists(target) {
				t.Errorf("%s write did not land", tc.mode)
			}
			wantCanary := map[string]string{"full-access": "canary-secret", "external-sandbox": ""}[tc.mode]
			if got["canary"] != wantCanary {
				t.Errorf("canary content %q, want %q", got["canary"], wantCanary)
			}
		})
	}
}

func TestRunFailsClosed(t *testing.T) {
	requireRoot(t)
	e := newEnv(t)
	for _, layer := range []string{"landlock", "cgroup", "mount-namespace"} {
		t.Run(layer, func(t *testing.T) {
			marker := filepath.Join(e.ws, "marker-"+layer)
			r := e.run(t, []string{"OXSUPERVISE_FORCE_UNAVAILABLE=" + layer}, "run", "--", "touch", marker)
			if r.code != 125 {
				t.Errorf("exit %d, want 125; stderr:\n%s", r.code, r.stderr)
			}
			if exists(marker) {
				t.Errorf("the command ran although layer %s was unavailable", layer)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if !strings.Contains(l, "warning:") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 1 || !strings.Contains(lines[0], "layer "+layer) {
				t.Errorf("want one error line naming layer %s, got:\n%s", layer, r.stderr)
			}
		})
	}
	t.Run("full-access-needs-no-landlock", func(t *testing.T) {
		marker := filepath.Join(e.ws, "marker-fa")
		r := e.run(t, []string{"OXSUPERVISE_FORCE_UNAVAILABLE=landlock"}, "run", "--sandbox", "full-access", "--", "touch", marker)
		if r.code != 0 || !exists(marker) {
			t.Errorf("full-access without landlock: exit %d, marker %v; stderr:\n%s", r.code, exists(marker), r.stderr)
		}
	})
}

func TestRunExitStatus(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
	} {
		r := e.run(t, nil, "run", "--", "sh", "-c", tc.script)
		if r.code != tc.want {
			t.Errorf("%q: exit %d, want %d (stderr %q)", tc.script, r.code, tc.want, r.stderr)
		}
	}
	r := e.run(t, nil, "run", "--", "no-such-command-oxs")
	if r.code != 127 {
		t.Errorf("missing command: exit %d, want 127", r.code)
	}
}

func TestRunEnvironmentAndCredentials(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	if err := os.Chown(e.ws, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	r := e.run(t, []string{"GITHUB_TOKEN=leak", "AWS_SECRET_ACCESS_KEY=leak", "KEEP_ME=yes"},
		"run", "--user", "65534", "--", "sh", "-c",
		`id -u; id -g; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status; env; ls /proc/self/fd; "$FSOP" write owned.txt`)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	if lines[0] != "65534" || lines[1] != "65534" {
		t.Errorf("uid/gid = %q/%q, want 65534", lines[0], lines[1])
	}
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "KEEP_ME=yes"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in:\n%s", want, r.stdout)
		}
	}
	for _, leak := range []string{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"} {
		if strings.Contains(r.stdout, leak) {
			t.Errorf("%s reached the command", leak)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(r.stdout), "OK") {
		t.Errorf("write in workspace as uid 65534 failed:\n%s", r.stdout)
	}

	// Through sudo, the caller is SUDO_UID.
	r = e.run(t, []string{"SUDO_UID=65534", "SUDO_GID=65534"}, "run", "--", "sh", "-c", `id -u; echo "$HOME"`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "65534\n") {
		t.Errorf("with SUDO_UID=65534: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, e.home) {
		t.Errorf("the command kept the supervisor's HOME: %q", r.stdout)
	}
}

func TestRunInheritedFDsClosed(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	f, err := os.Open(e.outside)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--audit-log", filepath.Join(t.TempDir(), "audit.jsonl"), "--", "ls", "/proc/self/fd")
	cmd.Dir = e.ws
	cmd.ExtraFiles = []*os.File{f, f, f} // fds 3, 4, 5 in oxsupervise
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	fds := strings.Fields(string(out))
	sort.Strings(fds)
	// ls itself opens one descriptor for /proc/self/fd.
	if len(fds) > 4 {
		t.Errorf("command sees descriptors %v, want only 0-2 (+ ls's own)", fds)
	}
}

func TestRunLeavesNothingBehind(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	cg2 := cgroup2Mount(t)
	e := newEnv(t)
	before := listTree(t, e.base)
	mountsBefore := mountsMentioning(t, e.base)

	pidFile := filepath.Join("/tmp", fmt.Sprintf("oxs-test-pid-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(pidFile) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--audit-log", filepath.Join(t.TempDir(), "audit.jsonl"), "--", "sh", "-c",
		fmt.Sprintf(`setsid nohup sleep 1000 >/dev/null 2>&1 & echo $! > %s.tmp; mv %[1]s.tmp %[1]s; sleep 1.5`, pidFile))
	cmd.Dir = e.ws
	cmd.Env = append(os.Environ(), "HOME="+e.home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// While the session runs, its protective mounts are invisible here.
	// The pid file says the command runs; setup time varies with load
	// (network programs attach first), so wait for it, not a fixed time.
	for deadline := time.Now().Add(20 * time.Second); !exists(pidFile) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	during := mountsMentioning(t, e.base)
	sessionCgroups := sessionGroups(t, cg2)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if len(during) != len(mountsBefore) {
		t.Errorf("session mounts leaked into the host namespace: %v", during)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(mustRead(t, pidFile)))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	if alive(pid) {
		unix.Kill(pid, unix.SIGKILL)
		t.Errorf("setsid nohup sleep (pid %d) survived the session", pid)
	}
	after := listTree(t, e.base)
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("files changed:\nbefore %v\nafter  %v", before, after)
	}
	if got := mountsMentioning(t, e.base); len(got) != len(mountsBefore) {
		t.Errorf("mounts left behind: %v", got)
	}
	for _, g := range sessionCgroups {
		if exists(g) {
			t.Errorf("session cgroup %s left behind", g)
		}
		if exists(filepath.Join("/run/oxsupervise/sessions", filepath.Base(g)+".json")) {
			t.Errorf("registry entry of %s left behind", filepath.Base(g))
		}
	}
	if len(sessionCgroups) == 0 {
		t.Error("no session cgroup was seen while the session ran")
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool { return procfs.Alive(pid) }

func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			out = append(out, fmt.Sprintf("%s %v %d", p, fi.Mode(), fi.Size()))
		}
		return nil
	})
	return out
}

func mountsMentioning(t *testing.T, s string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// sessionGroups lists the session cgroups that exist now.
func sessionGroups(t *testing.T, cg2 string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(cg2, "oxsupervise", "s-*"))
	return m
}

func TestRunForwardsSignals(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--audit-log", filepath.Join(e.base, "audit.jsonl"), "--", "sh", "-c",
		`trap 'echo got-term; exit 3' TERM; echo ready; sleep 100 & wait`)
	cmd.Dir = e.ws
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(out)
	if line, err := rd.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if err := cmd.Process.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	for {
		line, err := rd.ReadString('\n')
		stdout.WriteString(line)
		if err != nil {
			break
		}
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 3 || !strings.Contains(stdout.String(), "got-term") {
		t.Errorf("SIGTERM to the supervisor: exit %d, stdout %q; want the command's trap to run and exit 3", code, stdout.String())
	}
}
