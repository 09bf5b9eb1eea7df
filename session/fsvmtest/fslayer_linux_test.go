//go:build linux

package fsvmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/escapetest"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/landlock"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// The test binary's helper process (testutil.RunOp): "fsop OP ARGS..."
// performs one filesystem operation and prints OK or the errno name.
// Scripts inside a session run it as "$SELF" fsopVerb OP ARGS.
var (
	ops      = map[string]testutil.Op{"fsop": fsop, "unixop": unixop, "linkop": linkop, escapetest.OpName: escapetest.Op}
	fsopVerb = testutil.OpArgs("fsop")[0]
)

func TestMain(m *testing.M) {
	// run and attach start this binary as the session's launcher.
	if len(os.Args) > 1 && os.Args[1] == session.LauncherVerb {
		os.Exit(session.LauncherMain())
	}
	testutil.RunOp(ops)
	os.Exit(m.Run())
}

func fsop(args []string) int {
	if len(args) == 3 && args[0] == "deny-burst" {
		barrier()
		return denyBurst(args[1], args[2])
	}
	if len(args) == 3 && args[0] == "connect-burst" {
		barrier()
		return connectBurst(args[1], args[2])
	}
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: fsop mkdir|write|read|unix-connect PATH | fsop socket FAMILY")
		return 2
	}
	var err error
	switch args[0] {
	case "mkdir":
		err = unix.Mkdir(args[1], 0o755)
	case "write":
		var fd int
		fd, err = unix.Open(args[1], unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		if err == nil {
			_, err = unix.Write(fd, []byte("written in the session\n"))
			unix.Close(fd)
		}
	case "read":
		var fd int
		if fd, err = unix.Open(args[1], unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			unix.Close(fd)
		}
	case "unix-connect":
		var fd int
		if fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
			err = unix.Connect(fd, &unix.SockaddrUnix{Name: args[1]})
			unix.Close(fd)
		}
	case "socket":
		family, _ := strconv.Atoi(args[1])
		var fd int
		if fd, err = unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err == nil {
			unix.Close(fd)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown op %q\n", args[0])
		return 2
	}
	return testutil.ReportErrnoName(err)
}

// requireBPFLSM skips (fails in the VM) unless root and BPF-LSM is usable
// by doctor's probe, which is independent of the layer under test.
func requireBPFLSM(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	if err := loader.ProbeBPFLSM(); err != nil {
		testutil.SkipUnlessVM(t, "BPF-LSM not usable: %v", err)
	}
}

type env struct {
	base, ws, home, outside, auditLog, self string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	// BPF-LSM refuses anchors on overlayfs (fsguard.ErrOverlay; see
	// TestRunOverlayWorkspace).
	base := testutil.TmpfsBase(t, "oxs-fsvm-")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{base: base, ws: filepath.Join(base, "ws"), home: filepath.Join(base, "home"),
		outside: filepath.Join(base, "outside"), auditLog: filepath.Join(base, "audit.jsonl"), self: self}
	for _, d := range []string{e.ws, e.home, e.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(e.outside, "victim.txt"), "victim\n")
	mustWrite(t, filepath.Join(e.ws, "file.txt"), "tracked\n")
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "test@example.invalid"}, {"config", "user.name", "oxsupervise test"}} {
		e.git(t, args...)
	}
	return e
}

func (e *env) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = e.ws
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + e.home}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// policy compiles the default workspace-write policy for e.ws through the
// real loader, so protected names and anchors are what users get.
func (e *env) policy(t *testing.T, net string) *policy.Compiled {
	t.Helper()
	c, _, err := policy.Load(policy.LoadOptions{
		ManagedDir: filepath.Join(e.base, "managed"), Home: e.home, Workspace: e.ws,
		Flags: &policy.Flags{Net: net, AuditLog: e.auditLog},
		Env:   func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !c.FilesystemRules {
		t.Fatalf("policy %s has no filesystem rules", c.Mode)
	}
	return c
}

type syncBuffer = testutil.SyncBuffer

// cliEnv is vmtest.CLIEnv: the path of the oxsupervise binary the
// vmtest runner built for the guest.
const cliEnv = "OXSUPERVISE_VMTEST_CLI"

// TestRunBPFLSM runs two sessions through `oxsupervise run`, which must
// choose BPF-LSM because it is usable: one as users get it (Landlock
// stacked on top where the kernel's ABI honours the policy), where
// BPF-LSM refuses a first-time protected name that Landlock alone cannot,
// git keeps working and the launcher still builds its mount namespace;
// and one with Landlock marked unavailable, where BPF-LSM alone refuses a
// write outside the writable roots.
func TestRunBPFLSM(t *testing.T) {
	requireBPFLSM(t)
	cli := os.Getenv(cliEnv)
	if cli == "" {
		testutil.SkipUnlessVM(t, "%s not set: the vmtest runner provides the oxsupervise binary", cliEnv)
	}
	e := newEnv(t)
	run := func(unavailable, script string) string {
		t.Helper()
		cmd := exec.Command(cli, "run", "--workspace", e.ws, "--audit-log", e.auditLog, "--", "sh", "-c", script)
		cmd.Dir = e.ws
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + e.home, "SELF=" + e.self, "OUT=" + e.outside,
			session.ForceUnavailableEnv + "=" + unavailable}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil {
			log, _ := os.ReadFile(e.auditLog)
			t.Fatalf("oxsupervise run: %v\nstdout: %s\nstderr: %s\naudit log:\n%s", err, out, stderr.String(), log)
		}
		return stderr.String()
	}

	warnings := run("", `set -e
"$SELF" `+fsopVerb+` mkdir .codex > r-codex
"$SELF" `+fsopVerb+` write "$OUT/new.txt" > r-outside
git add file.txt
git commit -q -m "inside the session"
awk '$5 == "/proc/sys" && $6 ~ /^ro/ { print "present" }' /proc/self/mountinfo > r-mounts
`)
	if strings.Contains(warnings, "protected names that do not exist yet") {
		t.Errorf("run with BPF-LSM still warns that new protected names are unprotected:\n%s", warnings)
	}
	if got := read(t, filepath.Join(e.ws, "r-codex")); got != "EACCES" {
		t.Errorf("first-time mkdir .codex in the workspace: %s, want EACCES", got)
	}
	if _, err := os.Lstat(filepath.Join(e.ws, ".codex")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".codex exists after the refused mkdir: %v", err)
	}
	if got := read(t, filepath.Join(e.ws, "r-outside")); got != "EACCES" {
		t.Errorf("write outside the writable roots: %s, want EACCES", got)
	}
	if _, err := os.Lstat(filepath.Join(e.outside, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("outside/new.txt exists after the refused write: %v", err)
	}
	if got := read(t, filepath.Join(e.ws, "r-mounts")); got != "present" {
		t.Errorf("the launcher's mount namespace lacks its read-only /proc/sys: %q", got)
	}
	if log := e.git(t, "log", "--format=%s"); !strings.Contains(log, "inside the session") {
		t.Errorf("git commit inside the session left no commit: %q", log)
	}
	first, layers := sessionOf(t, e.auditLog, 0)
	expectDenial(t, e.auditLog, first, "mkdir", filepath.Join(e.ws, ".codex"))
	// The runner builds the launcher program beside the binary, as an
	// installation has it: the session (with its exec gate) used it.
	cliDir, err := filepath.EvalSymlinks(filepath.Dir(cli))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records(t, e.auditLog) {
		if want := "; launcher " + filepath.Join(cliDir, "oxsupervise-launch"); r.Ox.Kind == audit.KindSessionStart && !strings.Contains(r.Message, want) {
			t.Errorf("session_start %q does not name the launcher program (%q)", r.Message, want)
		}
	}
	if !strings.Contains(layers, session.LayerBPFLSM) || !strings.Contains(layers, session.LayerMountNS) {
		t.Errorf("session layers %q lack bpf-lsm or the mount namespace", layers)
	}
	// Landlock is stacked on BPF-LSM exactly when the kernel audits its
	// refusals (it comes first in the LSM order and would refuse the
	// outside write itself); the ABI comes from an independent probe.
	abi, llErr := landlock.ABI()
	switch {
	case llErr == nil && abi >= landlock.AuditABI:
		if !strings.Contains(layers, session.LayerLandlock) {
			t.Errorf("landlock ABI %d audits refusals but is not stacked on BPF-LSM: layers %q", abi, layers)
		}
	default:
		if strings.Contains(layers, session.LayerLandlock) {
			t.Errorf("landlock (ABI %d, %v) stacked on BPF-LSM although its refusals would not be audited: layers %q", abi, llErr, layers)
		}
		if llErr == nil && !strings.Contains(warnings, "cannot report refusals to audit") {
			t.Errorf("run does not say why landlock ABI %d is not stacked:\n%s", abi, warnings)
		}
		expectDenial(t, e.auditLog, first, "create", filepath.Join(e.outside, "new.txt"))
	}

	victim := filepath.Join(e.outside, "victim.txt")
	run(session.LayerLandlock, `"$SELF" `+fsopVerb+` write "$OUT/victim.txt" > r-alone`)
	if got := read(t, filepath.Join(e.ws, "r-alone")); got != "EACCES" {
		t.Errorf("write outside with BPF-LSM alone: %s, want EACCES", got)
	}
	if got := read(t, victim); got != "victim" {
		t.Errorf("outside/victim.txt changed to %q", got)
	}
	second, _ := sessionOf(t, e.auditLog, 1)
	expectDenial(t, e.auditLog, second, "open", victim)
}

// TestAttachBPFLSM attaches a running shell, then lets it write into a
// protected path and outside the workspace: BPF-LSM refuses both, which
// attach could not enforce at all without it.
func TestAttachBPFLSM(t *testing.T) {
	requireBPFLSM(t)
	e := newEnv(t)
	var warn syncBuffer
	layer, err := session.NewFSLayer(session.FSConfig{Warn: &warn})
	if err != nil {
		t.Fatalf("NewFSLayer where BPF-LSM is usable: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			layer.Close()
		}
	}()
	hook := filepath.Join(e.ws, ".git", "hooks", "pre-commit")
	victim := filepath.Join(e.outside, "victim.txt")
	sh := exec.Command("sh", "-c", `read go
"$SELF" `+fsopVerb+` write "$HOOK"
"$SELF" `+fsopVerb+` write "$VICTIM"
"$SELF" `+fsopVerb+` write "$WS/allowed.txt"`)
	sh.Env = []string{"PATH=/usr/bin:/bin", "SELF=" + e.self, "HOOK=" + hook, "VICTIM=" + victim, "WS=" + e.ws}
	var out bytes.Buffer
	sh.Stdout = &out
	stdin, entry, msgs := attachWaitingShell(t, e, sh, layer)
	if strings.Contains(msgs.String(), "does NOT enforce") {
		t.Errorf("attach with a bpf-lsm layer says it enforces no filesystem rules:\n%s", msgs.String())
	}
	fmt.Fprintln(stdin, "go")
	stdin.Close()
	if err := sh.Wait(); err != nil {
		t.Fatalf("attached shell: %v", err)
	}
	got := strings.Fields(out.String())
	if want := []string{"EACCES", "EACCES", "OK"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("attached shell wrote hook, outside, workspace: %v, want %v", got, want)
	}
	if _, err := os.Lstat(hook); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after the refused write: %v", hook, err)
	}
	if got := read(t, victim); got != "victim" {
		t.Errorf("outside/victim.txt changed to %q", got)
	}
	// Close drains the refusals into the log, as `oxsupervise attach`
	// does when the session's processes are gone.
	if err := layer.Close(); err != nil {
		t.Errorf("layer close: %v", err)
	}
	closed = true
	// A new file is refused at its creation (path_mknod).
	expectDenial(t, e.auditLog, entry.ID, "create", hook)
	expectDenial(t, e.auditLog, entry.ID, "open", victim)
}

// sessionOf returns the session id and the layers of the n-th
// session_start record.
func sessionOf(t *testing.T, log string, n int) (string, string) {
	t.Helper()
	for _, r := range records(t, log) {
		if r.Ox.Kind == audit.KindSessionStart {
			if n == 0 {
				return r.Ox.Session, r.Ox.Rule
			}
			n--
		}
	}
	t.Fatalf("audit log lacks session_start #%d", n)
	return "", ""
}

// expectDenial finds the bpf-lsm denial of action on path in session's
// records and checks what the schema promises of it.
func expectDenial(t *testing.T, log, session, action, path string) {
	t.Helper()
	var seen []string
	for _, r := range records(t, log) {
		if r.Ox.Kind != audit.KindDenial {
			continue
		}
		p := ""
		if r.File != nil {
			p = r.File.Path
		}
		seen = append(seen, fmt.Sprintf("%s %s %s %s", r.Ox.Session, r.Ox.Layer, r.Event.Action, p))
		if r.Ox.Session != session || r.Ox.Layer != audit.LayerBPFLSM || r.Event.Action != action || p != path {
			continue
		}
		if r.Ox.Errno != int(unix.EACCES) || r.Error == nil || r.Error.Code != "EACCES" {
			t.Errorf("denial of %s %s: errno %d %+v, want EACCES", action, path, r.Ox.Errno, r.Error)
		}
		if r.Ox.Class != audit.ClassFile || r.Ox.Rule == "" || r.Ox.Mode != string(policy.ModeWorkspaceWrite) {
			t.Errorf("denial of %s %s: class %q rule %q mode %q", action, path, r.Ox.Class, r.Ox.Rule, r.Ox.Mode)
		}
		if r.Process == nil || r.Process.PID == 0 || r.Process.Thread == nil || r.User == nil || r.User.ID != "0" {
			t.Errorf("denial of %s %s: process %+v user %+v", action, path, r.Process, r.User)
		}
		if r.File.Device == "" {
			t.Errorf("denial of %s %s: no device", action, path)
		}
		return
	}
	t.Errorf("no bpf-lsm denial of %s %s in session %s; denials: %q", action, path, session, seen)
}

func records(t *testing.T, log string) []audit.Record {
	t.Helper()
	return testutil.AuditRecords(t, log)
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// attachWaitingShell starts sh, a shell that waits for a line on its
// standard input before it goes on, and attaches it to a new session with
// the policy "full" and layer, as `attach --pid` does. The test writes
// the line (stdin); the session is killed and removed when the test ends.
func attachWaitingShell(t *testing.T, e *env, sh *exec.Cmd, layer session.SessionLayer) (io.WriteCloser, *session.Entry, *bytes.Buffer) {
	t.Helper()
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill() })
	reg := session.Registry{Dir: filepath.Join(e.base, "registry")}
	msgs := &bytes.Buffer{}
	entry, err := session.Attach(context.Background(), session.AttachOptions{
		PID: sh.Process.Pid, Policy: e.policy(t, "full"), CallerUID: os.Getuid(),
		Warn: msgs, Registry: reg, Layers: []session.SessionLayer{layer},
	})
	if err != nil {
		t.Fatalf("Attach: %v\n%s", err, msgs.String())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if g, err := cgroup.OpenSession(cgroup.Config{}, entry.ID); err == nil {
			g.Kill(ctx)
			g.Remove(ctx)
		}
		reg.Delete(entry.ID)
	})
	return stdin, entry, msgs
}
