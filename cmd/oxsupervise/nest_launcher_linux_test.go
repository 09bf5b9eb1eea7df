//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/host"
)

// forgeLauncherEnv makes TestNestForgedLauncherHelper, run inside a
// session, ask its supervisor for a nested session naming the launcher
// it says: "parent" (its parent's pid: a process of the session, not its
// child) or "none". TestNestMovedLauncherHelper takes "moved".
const forgeLauncherEnv = "OXS_TEST_FORGE_LAUNCHER"

// TestNestForgedLauncherHelper is the process inside the session of
// TestNestedSessionForeignLauncher: it prints the supervisor's answer and
// the number of groups below its own when the answer came. "garbage"
// sends no request, only a line that is none.
func TestNestForgedLauncherHelper(t *testing.T) {
	which := os.Getenv(forgeLauncherEnv)
	if which == "" {
		return
	}
	launcher := 0
	if which == "parent" {
		launcher = os.Getppid()
	}
	out := func(a host.NestAnswer, groups int, err error) {
		b, _ := json.Marshal(struct {
			Answer host.NestAnswer
			Groups int
			Err    string
		}{a, groups, fmt.Sprint(err)})
		fmt.Println(string(b))
		os.Exit(0)
	}
	conn, err := net.Dial("unix", os.Getenv(host.NestEnv))
	if err != nil {
		out(host.NestAnswer{}, -1, err)
	}
	wd, _ := os.Getwd()
	if which == "garbage" {
		// No request at all: the group made when the run connected
		// must go all the same.
		fmt.Fprintln(conn, "not a request")
	} else {
		json.NewEncoder(conn).Encode(host.NestRequest{Argv: []string{"true"}, Dir: wd, Launcher: launcher, ExecGate: true})
	}
	var a host.NestAnswer
	if err := json.NewDecoder(conn).Decode(&a); err != nil {
		out(a, -1, err)
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		out(a, -1, err)
	}
	var own string
	for _, l := range strings.Split(string(cg), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			own = p
		}
	}
	entries, err := os.ReadDir(filepath.Join(mustCgroup2(t), own))
	groups := 0
	for _, e := range entries {
		if e.IsDir() {
			groups++
		}
	}
	out(a, groups, err)
}

// TestNestedSessionForeignLauncher: the launcher a nested run names must
// be its own child (the process the supervisor moves into the child's
// group and whose spec it hands over); any other pid of the session, or
// none, is refused before anything is moved, and the group made when the
// run connected is gone when the refusal is answered, as it is for a run
// that sends no request at all.
func TestNestedSessionForeignLauncher(t *testing.T) {
	for _, tc := range []struct{ which, want string }{
		{"parent", "is not a child of pid"},
		{"none", "no launcher pid"},
		{"garbage", "bad request"},
	} {
		t.Run(tc.which, func(t *testing.T) {
			w := newNestWorld(t)
			helper := []string{w.bin, "-test.run=^TestNestForgedLauncherHelper$"}
			r := w.run(t, w.parent([]string{"--sandbox", "workspace-write"}, "sh", "-c", shellJoin(helper)+"; echo parent-alive-$$"), forgeLauncherEnv+"="+tc.which)
			if r.code != 0 {
				t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
			}
			var got struct {
				Answer host.NestAnswer
				Groups int
				Err    string
			}
			line, _, _ := strings.Cut(r.stdout, "\n")
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("the helper did not report (%v): stdout %q, stderr %q", err, r.stdout, r.stderr)
			}
			if got.Answer.Code != exitNoBoundary || !strings.Contains(got.Answer.Error, tc.want) || got.Answer.Spec != nil || got.Answer.Session != "" {
				t.Fatalf("a request naming launcher %q was not refused with %q: %+v", tc.which, tc.want, got)
			}
			if got.Groups != 0 {
				t.Errorf("the refused request left %d groups below the parent session's (%s)", got.Groups, got.Err)
			}
			for _, rec := range w.records(t) {
				if rec.Ox.ParentSession != "" && rec.Ox.Kind == audit.KindSessionStart {
					t.Errorf("a nested session started: %+v", rec)
				}
			}
			if !strings.Contains(r.stdout, "parent-alive-") {
				t.Errorf("the parent session's shell did not go on: %q", r.stdout)
			}
		})
	}
}

// TestNestMovedLauncherHelper, inside a session, names its own child (a
// sleep) as the launcher of a first nested session, which moves it into
// that child's group, then names it again for a second one: the second
// move would take a process out of a nested session into a sibling whose
// rules may be looser. It prints both verdicts (the answers after the
// spec), whether the second request was answered a spec, and the child's
// cgroup after the second.
func TestNestMovedLauncherHelper(t *testing.T) {
	if os.Getenv(forgeLauncherEnv) != "moved" {
		return
	}
	var got struct {
		First, Second host.NestAnswer
		SecondSpec    bool
		Cgroup, Err   string
	}
	done := func(err error) {
		got.Err = fmt.Sprint(err)
		b, _ := json.Marshal(got)
		fmt.Println(string(b))
		os.Exit(0)
	}
	sleep := exec.Command("sleep", "100")
	if err := sleep.Start(); err != nil {
		done(err)
	}
	defer sleep.Process.Kill()
	wd, _ := os.Getwd()
	// ask reads the spec answer into spec, and the verdict after it (the
	// launcher's move verified) into a.
	ask := func(a *host.NestAnswer, spec *bool) (net.Conn, error) {
		conn, err := net.Dial("unix", os.Getenv(host.NestEnv))
		if err != nil {
			return nil, err
		}
		json.NewEncoder(conn).Encode(host.NestRequest{Argv: []string{"true"}, Dir: wd, Launcher: sleep.Process.Pid, ExecGate: true})
		dec := json.NewDecoder(conn)
		if err := dec.Decode(a); err != nil || a.Spec == nil {
			return conn, err
		}
		*spec = true
		*a = host.NestAnswer{}
		return conn, dec.Decode(a)
	}
	var firstSpec bool
	first, err := ask(&got.First, &firstSpec)
	if err != nil {
		done(err)
	}
	defer first.Close()
	second, err := ask(&got.Second, &got.SecondSpec)
	if err != nil {
		done(err)
	}
	second.Close()
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sleep.Process.Pid))
	got.Cgroup = strings.TrimSpace(string(cg))
	done(err)
}

// TestNestedSessionMovedLauncher: a process already moved into a nested
// session is not moved again into another one (a sibling may be looser):
// the supervisor moves only a process of the session the caller runs in.
func TestNestedSessionMovedLauncher(t *testing.T) {
	w := newNestWorld(t)
	helper := []string{w.bin, "-test.run=^TestNestMovedLauncherHelper$"}
	r := w.run(t, w.parent([]string{"--sandbox", "workspace-write"}, helper...), forgeLauncherEnv+"=moved")
	if r.code != 0 {
		t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	var got struct {
		First, Second host.NestAnswer
		SecondSpec    bool
		Cgroup, Err   string
	}
	line, _, _ := strings.Cut(r.stdout, "\n")
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("the helper did not report (%v): stdout %q, stderr %q", err, r.stdout, r.stderr)
	}
	if got.Err != "<nil>" || got.First.Session == "" || !got.First.Admitted {
		t.Fatalf("the first request, naming the caller's own child, was not granted: %+v", got)
	}
	// The second request is answered its spec (the move is verified after
	// that), and then refused: the launcher's exec gate stays shut.
	if !got.SecondSpec || got.Second.Admitted || got.Second.Code != exitNoBoundary || !strings.Contains(got.Second.Error, "not in session") {
		t.Fatalf("a process of nested session %s was moved into another: %+v", got.First.Session, got)
	}
	if !strings.HasSuffix(got.Cgroup, "/"+got.First.Session) {
		t.Errorf("the process left nested session %s: its cgroup is %q", got.First.Session, got.Cgroup)
	}
	starts := 0
	for _, rec := range w.records(t) {
		if rec.Ox.ParentSession != "" && rec.Ox.Kind == audit.KindSessionStart {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("want the first nested session's session_start only, got %d", starts)
	}
}
