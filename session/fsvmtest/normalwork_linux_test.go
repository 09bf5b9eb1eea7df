//go:build linux

package fsvmtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/internal/testutil/normalwork"
)

// vmPath is the PATH of the commands runCLI runs.
const vmPath = "/usr/bin:/bin"

// runCLI runs `oxsupervise run` on e.ws with script and returns its exit
// code, stdout and stderr.
func (e *env) runCLI(t *testing.T, extraEnv []string, script string) (int, string, string) {
	t.Helper()
	cli := os.Getenv(cliEnv)
	if cli == "" {
		testutil.SkipUnlessVM(t, "%s not set: the vmtest runner provides the oxsupervise binary", cliEnv)
	}
	cmd := exec.Command(cli, "run", "--workspace", e.ws, "--audit-log", e.auditLog, "--", "sh", "-c", script)
	cmd.Dir = e.ws
	cmd.Env = append([]string{"PATH=" + vmPath, "HOME=" + e.home, "SELF=" + e.self, "OUT=" + e.outside}, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("oxsupervise run: %v", err)
	}
	return code, stdout.String(), stderr.String()
}

// TestNormalWorkBPFLSM runs package normalwork's table of everyday work
// (the one TestRunNormalWorkDefaults runs on the Landlock path: go build
// with the default cache, npm install, venv and pip install, git commit
// and worktree, multiprocessing locks), plus unpacking an archive and
// make, inside a default workspace-write session whose filesystem layer
// is BPF-LSM, while a write outside is still refused.
func TestNormalWorkBPFLSM(t *testing.T) {
	requireBPFLSM(t)
	e := newEnv(t)
	e.git(t, "add", "file.txt")
	e.git(t, "commit", "-qm", "base")
	archive := filepath.Join(e.outside, "src.tar")
	testutil.WriteTar(t, archive, map[string]string{"pkg/a.txt": "alpha\n", "pkg/deep/b.txt": "beta\n"})
	mustWrite(t, filepath.Join(e.ws, "Makefile"), "out.txt: file.txt\n\tcp file.txt out.txt\n")
	o := normalwork.Options{Go: filepath.Join(runtime.GOROOT(), "bin", "go"), Path: vmPath, SlowCPU: true}
	steps := normalwork.Prepare(t, e.ws, o)
	steps = append(steps,
		normalwork.Step{Name: "tar", Script: "tar xf " + archive},
		normalwork.Step{Name: "make", Script: "make -s out.txt"},
		normalwork.Step{Name: "outside-refused", Script: `! "$SELF" ` + fsopVerb + ` write "$OUT/new.txt" | grep -q OK`},
	)
	start := time.Now()
	code, stdout, stderr := e.runCLI(t, nil, normalwork.Script(t, steps))
	// Not an assertion: how long the cold go build and the rest take
	// under the VM's software CPU, for whoever tunes the test timeouts.
	t.Logf("the session's work took %v", time.Since(start).Round(time.Second))
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	normalwork.CheckOutput(t, steps, stdout, stderr)
	id, layers := sessionOf(t, e.auditLog, 0)
	if !strings.Contains(layers, "bpf-lsm") {
		t.Fatalf("session layers %q: the work did not run under BPF-LSM", layers)
	}
	normalwork.CheckAfter(t, steps, o, e.ws, e.home, func(args ...string) string { return e.git(t, args...) })
	// make ran after git-commit appended to file.txt.
	for path, want := range map[string]string{"pkg/a.txt": "alpha\n", "pkg/deep/b.txt": "beta\n", "out.txt": "tracked\nchange\n"} {
		if got, err := os.ReadFile(filepath.Join(e.ws, path)); err != nil || string(got) != want {
			t.Errorf("%s after the session: %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.outside, "new.txt")); err == nil {
		t.Error("outside/new.txt exists: the refused write happened")
	}
	expectDenial(t, e.auditLog, id, "create", filepath.Join(e.outside, "new.txt"))
}

// TestRunOverlayWorkspace: a workspace on overlayfs (the VM's root is
// one) cannot get BPF-LSM rules; run says so and uses Landlock where its
// ABI honours the policy, or refuses to start (exit 125) — never runs
// without a filesystem boundary.
func TestRunOverlayWorkspace(t *testing.T) {
	requireBPFLSM(t)
	var sfs unix.Statfs_t
	if err := unix.Statfs("/var/tmp", &sfs); err != nil {
		t.Fatal(err)
	}
	if sfs.Type != unix.OVERLAYFS_SUPER_MAGIC {
		testutil.SkipUnlessVM(t, "/var/tmp is not on overlayfs here (magic %#x)", sfs.Type)
	}
	base, err := os.MkdirTemp("/var/tmp", "oxs-overlay-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	e := &env{base: base, ws: filepath.Join(base, "ws"), home: filepath.Join(base, "home"),
		outside: filepath.Join(base, "outside"), auditLog: filepath.Join(base, "audit.jsonl")}
	e.self, _ = os.Executable()
	for _, d := range []string{e.ws, e.home, e.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := e.runCLI(t, nil, `"$SELF" `+fsopVerb+` write "$OUT/new.txt"; "$SELF" `+fsopVerb+` write inside.txt`)
	if !strings.Contains(stderr, "overlayfs") {
		t.Errorf("run does not say that the overlayfs workspace keeps BPF-LSM out:\n%s", stderr)
	}
	switch code {
	case 125:
		// No other filesystem layer could take over: nothing ran.
		if stdout != "" {
			t.Errorf("exit 125 but the command ran: %q", stdout)
		}
	case 0:
		// The Landlock path: outside the writable roots the session's
		// mount view is read-only (DESIGN §9), so the VFS refuses first.
		if got := strings.Fields(stdout); len(got) != 2 || got[0] != "EROFS" || got[1] != "OK" {
			t.Errorf("outside, inside writes = %q, want [EROFS OK]", got)
		}
		_, layers := sessionOf(t, e.auditLog, 0)
		if strings.Contains(layers, "bpf-lsm") || !strings.Contains(layers, "landlock") {
			t.Errorf("session layers %q: want landlock and not bpf-lsm", layers)
		}
	default:
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, err := os.Lstat(filepath.Join(e.outside, "new.txt")); err == nil {
		t.Error("outside/new.txt exists")
	}
}
