//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/host"
	"github.com/openoxide/oxsupervise/session"
)

// The ways into a nested session besides `run` typed in a session: the
// agent hook's rewrite, a daemon session, and what the supervisor's socket
// does with a caller outside the session.

// init makes this test binary the CLI when it is run as `BIN VERB ...`
// with cliAsEnv set (the command lines `oxsupervise hook` writes name the
// executable and a verb, without the -test.run prefix oxs adds).
func init() {
	if os.Getenv(cliAsEnv) != "" && len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.") && os.Args[1] != session.LauncherVerb {
		os.Exit(dispatch(os.Args[1:], streams{os.Stdin, os.Stdout, os.Stderr}))
	}
}

// TestNestedSessionFromHook: the command `oxsupervise hook claude-code`
// rewrites a Bash tool call into runs, in the agent's session, in a
// nested session with the command tier: the key the agent has is not in
// the command's environment, a workspace write succeeds, and the audit
// log has the nested session.
func TestNestedSessionFromHook(t *testing.T) {
	w := newNestWorld(t)
	in := `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"echo \"key=[$ANTHROPIC_API_KEY] session=$OXSUPERVISE_SESSION\"; echo done > hook-wrote"}}`
	hook := w.command([]string{w.bin, "hook", "claude-code"}, session.SessionEnv+"=s-000000000000")
	hook.Stdin = strings.NewReader(in)
	out, err := hook.Output()
	if err != nil {
		t.Fatalf("hook: %v", err)
	}
	var answer struct {
		HookSpecificOutput struct {
			PermissionDecision string `json:"permissionDecision"`
			UpdatedInput       struct {
				Command string `json:"command"`
			} `json:"updatedInput"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(out, &answer); err != nil {
		t.Fatalf("hook answer %q: %v", out, err)
	}
	rewritten := answer.HookSpecificOutput.UpdatedInput.Command
	if !strings.Contains(rewritten, " run --tier=command --agent=") {
		t.Fatalf("the hook did not rewrite the command into a nested run: %q", out)
	}
	r := w.run(t, w.parent([]string{"--agent", "claude-code"}, "bash", "-c", `echo "agent-key=[$ANTHROPIC_API_KEY]"; `+rewritten),
		"ANTHROPIC_API_KEY=sk-hook-test")
	if r.code != 0 {
		t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	start := nestedStart(t, w.records(t))
	for _, want := range []string{"agent-key=[sk-hook-test]", "key=[] session=" + start.Ox.Session} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(w.ws, "hook-wrote")); err != nil || string(b) != "done\n" {
		t.Errorf("the nested command's workspace write: %q, %v", b, err)
	}
}

// TestNestedSessionThroughDaemon: a session the daemon runs for an
// unprivileged user serves its nested runs the same way: a widening is
// refused with 125, a tighter child's write is refused (EACCES, file
// unchanged) and named in the child's audit record with both sessions.
func TestNestedSessionThroughDaemon(t *testing.T) {
	w := newCLIWorld(t)
	w.serve(t)
	ws := filepath.Join(w.base, "ws")
	file := filepath.Join(ws, "f")
	if err := os.WriteFile(file, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(file, nobodyUID, nobodyUID)
	nested := func(args ...string) string {
		return shellJoin(append([]string{w.bin, "-test.run=^TestCLIHelperProcess$", "--"}, args...))
	}
	script := nested("run", "--sandbox", "full-access", "--", "true") + "; echo widen-exit=$?; " +
		nested("run", "--sandbox", "read-only", "--", "sh", "-c", "echo new > "+file+"; echo child-exit=$?") + "; echo nested-exit=$?"
	r := w.cli(t, nobodyUID, "run", "--sandbox", "workspace-write", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"widen-exit=125", "nested-exit=0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, "sandbox.mode:") {
		t.Errorf("the widening is not named on stderr:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "child-exit=") || strings.Contains(r.stdout, "child-exit=0") {
		t.Errorf("the child's write did not fail: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(file); string(b) != "old\n" {
		t.Errorf("file changed by a refused write: %q", b)
	}
	nw := &nestWorld{auditLog: w.opts.AuditPath}
	recs := nw.records(t)
	start := nestedStart(t, recs)
	var denial bool
	for _, rec := range recs {
		if rec.Ox.Kind == audit.KindDenial && rec.Ox.Session == start.Ox.Session && rec.Ox.ParentSession == start.Ox.ParentSession &&
			rec.File != nil && (rec.File.Path == file || rec.File.Path == ws) {
			denial = true
		}
	}
	if !denial {
		t.Errorf("no denial of %s naming nested session %s and its parent %s: %+v", file, start.Ox.Session, start.Ox.ParentSession, recs)
	}
	if !strings.Contains(r.stderr, "session "+start.Ox.Session) {
		t.Errorf("no refusal summary of %s on stderr:\n%s", start.Ox.Session, r.stderr)
	}
}

// TestNestedSessionSocketRefusesOutsiders: the supervisor's socket is
// reachable by anyone, and a process outside the session it serves is
// refused whatever it sends; nothing is created for it.
func TestNestedSessionSocketRefusesOutsiders(t *testing.T) {
	w := newNestWorld(t)
	sockFile := filepath.Join(w.ws, "sock")
	cmd := w.command(w.parent([]string{"--sandbox", "workspace-write"}, "sh", "-c",
		`sed -n 's/^0:://p' /proc/self/cgroup > `+sockFile+`.cg; echo "$`+host.NestEnv+`" > `+sockFile+`.tmp && mv `+sockFile+`.tmp `+sockFile+`; exec sleep 1000`))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-waited
	}()
	var sock string
	for deadline := time.Now().Add(30 * time.Second); sock == ""; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(sockFile); err == nil {
			sock = strings.TrimSpace(string(b))
		}
		select {
		case err := <-waited:
			waited <- err
			t.Fatalf("the parent run ended: %v\n%s", err, &errb)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session never named its supervisor socket:\n%s", &errb)
		}
	}
	cg, err := os.ReadFile(sockFile + ".cg")
	if err != nil {
		t.Fatal(err)
	}
	parentGroup := filepath.Join(mustCgroup2(t), strings.TrimSpace(string(cg)))
	groups := func() int {
		entries, err := os.ReadDir(parentGroup)
		if err != nil {
			t.Fatalf("the parent session's group: %v", err)
		}
		n := 0
		for _, e := range entries {
			if e.IsDir() {
				n++
			}
		}
		return n
	}
	before := groups()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("connect %s: %v", sock, err)
	}
	defer conn.Close()
	// The request claims a session; the peer's cgroup says otherwise.
	json.NewEncoder(conn).Encode(host.NestRequest{Argv: []string{"true"}, Dir: w.ws, Env: []string{session.SessionEnv + "=forged"}})
	var a host.NestAnswer
	if err := json.NewDecoder(conn).Decode(&a); err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if a.Code != exitNoBoundary || !strings.Contains(a.Error, "not authorized") || a.Session != "" || a.Spec != nil {
		t.Fatalf("an outsider's request was not refused: %+v", a)
	}
	if after := groups(); after != before {
		t.Errorf("the refused request created a group in the parent's %s: %d before, %d after", parentGroup, before, after)
	}
}

func mustCgroup2(t *testing.T) string {
	t.Helper()
	m, err := cgroup.Cgroup2Mount()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
