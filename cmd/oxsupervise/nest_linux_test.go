//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/planner"
)

// nestWorld runs standalone `oxsupervise run` sessions (this test binary
// as the CLI) whose commands run `oxsupervise run` again inside them: the
// nested sessions of docs/agents-tiers.md, on the real kernel.
type nestWorld struct {
	base, bin, ws, home, auditLog, nestDir string
}

func newNestWorld(t *testing.T) *nestWorld {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: a standalone run creates cgroups and the nested sessions below them")
	}
	caps := planner.Probe(nil)
	if caps.Cgroup2 != nil {
		t.Skipf("SKIPPED: no cgroup2 (%v): no session can be created here", caps.Cgroup2)
	}
	if caps.Landlock != nil {
		// The nested session stacks a Landlock domain: without Landlock
		// there is nothing of this path to test.
		t.Skipf("SKIPPED: no Landlock on this kernel (%v): nested sessions stack a Landlock domain", caps.Landlock)
	}
	base, err := os.MkdirTemp("/var/tmp", "oxs-nest-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	t.Cleanup(func() { os.RemoveAll(base) })
	w := &nestWorld{base: base, bin: filepath.Join(base, "oxsupervise"), ws: filepath.Join(base, "ws"),
		home: filepath.Join(base, "home"), auditLog: filepath.Join(base, "log", "audit.jsonl"), nestDir: filepath.Join(base, "nest")}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err == nil {
		err = os.WriteFile(w.bin, b, 0o755)
	}
	if err != nil {
		t.Fatalf("copy test binary: %v", err)
	}
	for _, d := range []string{w.ws, w.home, filepath.Dir(w.auditLog)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// oxs is the command line of `oxsupervise ARGS...` with this test binary.
func (w *nestWorld) oxs(args ...string) []string {
	return append([]string{w.bin, "-test.run=^TestCLIHelperProcess$", "--"}, args...)
}

// parent is `oxsupervise run` of a parent session with parentFlags whose
// command is argv.
func (w *nestWorld) parent(parentFlags []string, argv ...string) []string {
	args := append([]string{"run", "--audit-log", w.auditLog, "--workspace", w.ws}, parentFlags...)
	return w.oxs(append(append(args, "--"), argv...)...)
}

func (w *nestWorld) command(argv []string, env ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = w.ws
	cmd.Env = append(os.Environ(), cliAsEnv+"=1", nestDirEnv+"="+w.nestDir, pinDirEnv+"=off", "HOME="+w.home)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func (w *nestWorld) run(t *testing.T, argv []string, env ...string) cliResult {
	t.Helper()
	cmd := w.command(argv, env...)
	return runCLI(t, cmd)
}

// records reads the audit log.
func (w *nestWorld) records(t *testing.T) []audit.Record {
	t.Helper()
	return testutil.AuditRecords(t, w.auditLog)
}

// nestedStart is the session_start record of the one nested session in
// the log, failing the test without exactly one.
func nestedStart(t *testing.T, recs []audit.Record) audit.Record {
	t.Helper()
	var found []audit.Record
	for _, r := range recs {
		if r.Ox.Kind == audit.KindSessionStart && r.Ox.ParentSession != "" {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one nested session_start in the audit log, got %d: %+v", len(found), recs)
	}
	return found[0]
}

// TestNestedSessionWidening asks, from inside a real session, for a child
// looser than the parent on each dimension a flag can reach: each is
// refused with exit 125, naming the dimension, and nothing ran.
func TestNestedSessionWidening(t *testing.T) {
	w := newNestWorld(t)
	other := filepath.Join(w.base, "other")
	os.MkdirAll(other, 0o755)
	cases := []struct {
		name        string
		parent      []string
		child       []string
		wantInError string
	}{
		{"full-access mode", []string{"--sandbox", "workspace-write"}, []string{"--sandbox", "full-access"}, "sandbox.mode"},
		{"writable root outside the parent's", []string{"--sandbox", "workspace-write"}, []string{"--writable-root", other}, "sandbox.writable_roots"},
		{"workspace-write in a read-only parent", []string{"--sandbox", "read-only"}, []string{"--sandbox", "workspace-write"}, "sandbox.mode"},
		{"network full when the parent has none", []string{"--sandbox", "workspace-write", "--net", "none"}, []string{"--net", "full"}, "network.policy"},
		{"an allowlist when the parent has none", []string{"--sandbox", "workspace-write", "--net", "none"}, []string{"--allow-net", "192.0.2.1:443"}, "network.policy"},
		{"network full when the parent has an allowlist", []string{"--sandbox", "workspace-write", "--allow-net", "192.0.2.1:443"}, []string{"--net", "full"}, "network.policy"},
		{"a host the parent does not allow", []string{"--sandbox", "workspace-write", "--allow-net", "192.0.2.1:443"}, []string{"--allow-net", "192.0.2.2:443"}, "network.allow"},
		{"a port the parent does not allow", []string{"--sandbox", "workspace-write", "--allow-net", "192.0.2.1:443"}, []string{"--allow-net", "192.0.2.1:80"}, "network.allow"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			marker := filepath.Join(w.ws, "ran-"+strconv.Itoa(i))
			child := append(append([]string{"run"}, tc.child...), "--", "touch", marker)
			r := w.run(t, w.parent(tc.parent, w.oxs(child...)...))
			if r.code != exitNoBoundary {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", r.code, exitNoBoundary, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, "nested session refused") || !strings.Contains(r.stderr, tc.wantInError+":") {
				t.Errorf("stderr does not name %s as the widening:\n%s", tc.wantInError, r.stderr)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused child's command ran (%s: %v)", marker, err)
			}
		})
	}
}

// TestNestedSessionTighterWrite: a write the parent allows and the child
// does not fails with EACCES, leaves the file as it was, comes back to the
// caller as a readable refusal, and its audit record names both sessions.
func TestNestedSessionTighterWrite(t *testing.T) {
	w := newNestWorld(t)
	file := filepath.Join(w.ws, "f")
	if err := os.WriteFile(file, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The parent writes (its workspace is writable), then the child
	// tries: read-only is tighter, so it is granted, and refused there.
	child := w.oxs("run", "--sandbox", "read-only", "--", "sh", "-c", "echo new > "+file+"; echo child-exit=$?")
	script := "echo parent > " + filepath.Join(w.ws, "parent-wrote") + " && " + shellJoin(child)
	r := w.run(t, w.parent([]string{"--sandbox", "workspace-write"}, "sh", "-c", script))
	if r.code != 0 {
		t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(w.ws, "parent-wrote")); err != nil || string(b) != "parent\n" {
		t.Fatalf("the parent could not write its workspace: %q, %v", b, err)
	}
	if !strings.Contains(r.stdout, "child-exit=") || strings.Contains(r.stdout, "child-exit=0") || !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("the child's write did not fail with EACCES: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(file); string(b) != "old\n" {
		t.Errorf("file changed by a refused write: %q", b)
	}
	recs := w.records(t)
	start := nestedStart(t, recs)
	child0 := start.Ox.Session
	var parentID string
	for _, rec := range recs {
		if rec.Ox.Kind == audit.KindSessionStart && rec.Ox.ParentSession == "" {
			parentID = rec.Ox.Session
		}
	}
	if parentID == "" || start.Ox.ParentSession != parentID {
		t.Fatalf("the nested session_start names parent %q, the parent session is %q", start.Ox.ParentSession, parentID)
	}
	var denial *audit.Record
	for i, rec := range recs {
		if rec.Ox.Kind == audit.KindDenial && rec.File != nil && rec.File.Path == file || rec.Ox.Kind == audit.KindDenial && rec.File != nil && rec.File.Path == w.ws {
			denial = &recs[i]
		}
	}
	if denial == nil {
		t.Fatalf("no denial record for %s in the audit log: %+v", file, recs)
	}
	if denial.Ox.Session != child0 || denial.Ox.ParentSession != parentID || denial.Ox.Errno != int(syscall.EACCES) {
		t.Errorf("denial record: session %q parent %q errno %d, want %q %q %d", denial.Ox.Session, denial.Ox.ParentSession, denial.Ox.Errno, child0, parentID, syscall.EACCES)
	}
	// The caller (an agent's model) reads the refusal, with the session.
	if !strings.Contains(r.stderr, "oxsupervise: refused") || !strings.Contains(r.stderr, "session "+child0) {
		t.Errorf("no refusal summary naming %s on stderr:\n%s", child0, r.stderr)
	}
}

// TestNestedSessionCommandTier: a command-tier child of an agent session
// has no provider credentials in its environment (the parent has them),
// and cannot connect to the provider host the parent reaches.
func TestNestedSessionCommandTier(t *testing.T) {
	w := newNestWorld(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	// The stand-in for the model API: the profile follows the agent's
	// base-URL variable, so this is the provider host of the session.
	baseURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	connect := fmt.Sprintf("(exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null && echo %%s-connected || echo %%s-refused", port)
	childScript := `echo "child-key=[$ANTHROPIC_API_KEY]"; ` + strings.ReplaceAll(fmt.Sprintf(connect, "child", "child"), "%s", "child")
	// No --agent: the tier is the parent session's profile's.
	child := w.oxs("run", "--tier=command", "--", "bash", "-c", childScript)
	parentScript := `echo "parent-key=[$ANTHROPIC_API_KEY]"; ` + fmt.Sprintf(connect, "parent", "parent") + "; " + shellJoin(child)
	r := w.run(t, w.parent([]string{"--agent", "claude-code"}, "bash", "-c", parentScript),
		"ANTHROPIC_API_KEY=sk-nested-test", "ANTHROPIC_BASE_URL="+baseURL)
	if r.code != 0 {
		t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"parent-key=[sk-nested-test]", "parent-connected", "child-key=[]", "child-refused"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
		}
	}
	recs := w.records(t)
	start := nestedStart(t, recs)
	if !strings.Contains(start.Ox.Rule, "tier: command of claude-code") {
		t.Errorf("nested session_start rule %q does not name the tier", start.Ox.Rule)
	}
	var refused bool
	for _, rec := range recs {
		if rec.Ox.Kind == audit.KindDenial && rec.Ox.Class == audit.ClassNetwork && rec.Ox.Session == start.Ox.Session &&
			rec.Destination != nil && int(rec.Destination.Port) == port {
			refused = rec.Ox.ParentSession == start.Ox.ParentSession
		}
	}
	if !refused {
		t.Errorf("no network denial of the child (both sessions named) for port %d: %+v", port, recs)
	}
}

// TestNestedSessionDiesWithParent: stopping the parent session, or
// killing its supervisor, kills the nested session's command.
func TestNestedSessionDiesWithParent(t *testing.T) {
	for _, how := range []string{"stop", "supervisor killed"} {
		t.Run(how, func(t *testing.T) {
			w := newNestWorld(t)
			pidFile := filepath.Join(w.ws, "pid")
			cgFile := filepath.Join(w.ws, "cgroup")
			child := w.oxs("run", "--", "sh", "-c", "cat /proc/self/cgroup > "+cgFile+".tmp && mv "+cgFile+".tmp "+cgFile+"; echo $$ > "+pidFile+".tmp && mv "+pidFile+".tmp "+pidFile+"; exec sleep 1000")
			cmd := w.command(w.parent([]string{"--sandbox", "workspace-write"}, child...))
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			defer func() {
				cmd.Process.Kill()
				<-waited
			}()
			pid := waitForPID(t, pidFile, waited, &errb)
			cg, _ := os.ReadFile(cgFile)
			parentID := nestedParentOf(t, string(cg))
			// A SIGKILLed supervisor leaves its (emptied) groups and
			// registry entry for `stop` to remove, as for any session.
			t.Cleanup(func() { w.run(t, w.oxs("stop", parentID)) })
			switch how {
			case "stop":
				r := w.run(t, w.oxs("stop", parentID))
				if r.code != 0 {
					t.Fatalf("stop %s: exit %d: %s", parentID, r.code, r.stderr)
				}
			default:
				cmd.Process.Signal(syscall.SIGKILL)
			}
			select {
			case <-waited:
			case <-time.After(30 * time.Second):
				t.Fatal("the parent run did not end")
			}
			waited <- nil // for the deferred receive
			// Judged by /proc/PID/stat (PID 1 here does not reap): gone, or a zombie.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if !procAlive(pid) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the nested command (pid %d) outlived its parent session", pid)
				}
			}
		})
	}
}

func waitForPID(t *testing.T, path string, waited chan error, stderr *bytes.Buffer) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-waited:
			t.Fatalf("the parent run ended before its child started: %v\n%s", err, stderr)
		default:
		}
		if b, err := os.ReadFile(path); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil {
				return pid
			}
		}
	}
	t.Fatalf("the nested command never started:\n%s", stderr)
	return 0
}

// nestedParentOf returns the parent session of a /proc/PID/cgroup of a
// nested session's process, checking the child's group lies below it.
func nestedParentOf(t *testing.T, procCgroup string) string {
	t.Helper()
	for _, l := range strings.Split(procCgroup, "\n") {
		if p, ok := strings.CutPrefix(l, "0::/"+cgroup.DefaultParent+"/"); ok {
			parts := strings.Split(p, "/")
			if len(parts) != 2 {
				t.Fatalf("the nested command's cgroup %q is not a group below its parent session's", l)
			}
			return parts[0]
		}
	}
	t.Fatalf("no session cgroup in %q", procCgroup)
	return ""
}

func procAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// TestNestedSessionDenyRead: a path the parent may not read stays
// unreadable in a child whose own request does not deny it (protections
// are inherited: Tighten unions them, and the parent's boundary is the
// child's too).
func TestNestedSessionDenyRead(t *testing.T) {
	w := newNestWorld(t)
	secret := filepath.Join(w.ws, "secret")
	if err := os.WriteFile(secret, []byte("the-secret-value\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(w.base, "parent.toml")
	if err := os.WriteFile(conf, []byte("[sandbox]\ndeny_read = ["+strconv.Quote(secret)+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := "cat " + secret + "; echo X-exit=$?"
	child := w.oxs("run", "--sandbox", "workspace-write", "--", "sh", "-c", strings.ReplaceAll(read, "X", "child"))
	r := w.run(t, w.parent([]string{"--sandbox", "workspace-write", "--config", conf}, "sh", "-c", strings.ReplaceAll(read, "X", "parent")+"; "+shellJoin(child)))
	if r.code != 0 {
		t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "the-secret-value") {
		t.Fatalf("a denied read succeeded: %q", r.stdout)
	}
	// How the read is refused is the parent's layer's (on the Landlock
	// path the mount namespace hides the file's content); what matters
	// is that both reads ran and neither saw the content.
	for _, who := range []string{"parent", "child"} {
		if !strings.Contains(r.stdout, who+"-exit=") {
			t.Errorf("the %s's read of %s did not run: stdout %q, stderr %q", who, secret, r.stdout, r.stderr)
		}
	}
	nestedStart(t, w.records(t))
}

// TestNestedSessionSignals: the agent may signal its commands (a command
// that times out is killed), a command may not signal the agent: the
// child's Landlock domain is nested in the parent's, and signals are
// scoped to a domain and the domains nested in it.
func TestNestedSessionSignals(t *testing.T) {
	w := newNestWorld(t)
	cpid := filepath.Join(w.ws, "cpid")
	toParent := w.oxs("run", "--", "sh", "-c", `kill -0 "$AGENT" && echo child-signalled-parent || echo child-signal-refused`)
	inChild := w.oxs("run", "--", "sh", "-c", "sleep 1000 & echo $! > "+cpid+"; wait $!; echo child-sleep-ended=$?")
	script := `AGENT=$$; export AGENT; ` + shellJoin(toParent) + `; ` + shellJoin(inChild) + ` & N=$!; ` +
		`while [ ! -s ` + cpid + ` ]; do sleep 0.05; done; kill -TERM "$(cat ` + cpid + `)" && echo parent-signalled-child; wait $N`
	r := w.run(t, w.parent([]string{"--sandbox", "workspace-write"}, "sh", "-c", script))
	if r.code != 0 {
		t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"child-signal-refused", "parent-signalled-child", "child-sleep-ended=143"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, "scope.signal") {
		t.Errorf("the refused signal is not summarized on stderr:\n%s", r.stderr)
	}
}
