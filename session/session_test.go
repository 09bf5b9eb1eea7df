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
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/escapetest"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/session"
)

// bin and fsop are built once in TestMain: the tests run oxsupervise the
// way a user does.
// bin is the built oxsupervise and launcherProgram the launcher program
// built beside it (cmd/oxsupervise-launch).
var bin, launcherProgram, fsop string

func TestMain(m *testing.M) {
	// The in-process tests (Run called directly) use this test binary as
	// the launcher.
	if len(os.Args) > 1 && os.Args[1] == session.LauncherVerb {
		os.Exit(session.LauncherMain())
	}
	// The escape table's sessions run this binary again for each step.
	testutil.RunOp(map[string]testutil.Op{escapetest.OpName: escapetest.Op})
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
	// The launcher program beside it, as installed: sessions use it.
	launcherProgram = filepath.Join(dir, "oxsupervise-launch")
	for _, b := range [][2]string{{bin, "../cmd/oxsupervise"}, {launcherProgram, "../cmd/oxsupervise-launch"}, {fsop, "./testdata/fsop"}} {
		// Without cgo, as the Makefile builds oxsupervise and the launcher.
		cmd := exec.Command("go", "build", "-o", b[0], b[1])
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
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
	// bin is the oxsupervise run uses; "" is the built one (bin).
	bin string
}

// selfExe is this test binary, which is also the sessions' launcher
// (RunOptions.SelfExe): TestMain hands the launcher's verb to it.
func selfExe(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// runEnv is the start of a test that runs sessions on this machine's
// Landlock path: it skips without root, a usable Landlock or cgroup2
// (each probed apart from the code under test) and returns a fresh env
// and the launcher.
func runEnv(t *testing.T) (*env, string) {
	t.Helper()
	requireRoot(t)
	landlockABI(t)
	cgroup2Mount(t)
	return newEnv(t), selfExe(t)
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
	exe := bin
	if e.bin != "" {
		exe = e.bin
	}
	cmd := exec.CommandContext(ctx, exe, args...)
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
	// read-only (launcher.MountPlan.ReadOnlyView): the VFS refuses a
	// change there with EROFS before Landlock is asked.
	outsideRoots = readOnly
)
