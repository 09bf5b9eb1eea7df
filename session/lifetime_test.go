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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/internal/procfs"
	"github.com/openoxide/oxsupervise/session"

	"golang.org/x/sys/unix"
)

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
	// The one thing a session leaves on purpose is the sandbox cache
	// root, kept for the next (caches_linux.go), with nothing in it from
	// a command that ran no tool.
	cacheRoot := filepath.Join(e.home, ".cache", session.SandboxCacheDir)
	if entries, err := os.ReadDir(cacheRoot); err != nil || len(entries) != 0 {
		t.Errorf("the sandbox cache root %s after a session that used no tool: %v, %v; want it there and empty", cacheRoot, entries, err)
	}
	after := slices.DeleteFunc(listTree(t, e.base), func(entry string) bool {
		p, _, _ := strings.Cut(entry, " ")
		return p == cacheRoot || p == filepath.Dir(cacheRoot) && !slices.Contains(before, entry)
	})
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

// TestRunOutlivesItsStderr: a supervisor whose stderr has no reader any
// more (`run ... 2>&1 | head` after head exited) is not killed by SIGPIPE
// at its next line (here the timing lines, written through the whole
// session): it ends the session, leaving no group behind, and
// writes session_stop. The command starts with SIGPIPE's default action
// (not ignored), as it would outside.
func TestRunOutlivesItsStderr(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	cg2 := cgroup2Mount(t)
	e := newEnv(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // no reader: every write to w is EPIPE, or SIGPIPE
	defer w.Close()
	log := filepath.Join(e.base, "audit.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--audit-log", log, "--", "sh", "-c", `grep '^SigIgn:' /proc/self/status`)
	cmd.Dir = e.ws
	cmd.Env = append(os.Environ(), "HOME="+e.home, "OXSUPERVISE_DEBUG_TIMING=1")
	cmd.Stderr = w
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run with a reader-less stderr: %v (%v); stdout %q", err, cmd.ProcessState, out)
	}
	// SigIgn: a hexadecimal mask, bit n-1 for signal n.
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(string(out), "SigIgn:")), 16, 64)
	if err != nil {
		t.Fatalf("the command's SigIgn line %q: %v", out, err)
	}
	if mask&(1<<(unix.SIGPIPE-1)) != 0 {
		t.Errorf("the command started with SIGPIPE ignored (SigIgn %x)", mask)
	}
	var id string
	for _, rec := range readAudit(t, log) {
		if rec.Ox.Kind == audit.KindSessionStop {
			id = rec.Ox.Session
		}
	}
	if id == "" {
		t.Fatal("no session_stop in the audit log")
	}
	for _, g := range sessionGroups(t, cg2) {
		if filepath.Base(g) == id {
			t.Errorf("the session's group %s is left", g)
		}
	}
}
