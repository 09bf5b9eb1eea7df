//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/openoxide/oxsupervise/host"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/session"
)

// gateMarkerEnv makes TestNestGateRefusedHelper, run inside a session,
// ask for a nested session whose command creates the file it names.
const gateMarkerEnv = "OXS_TEST_GATE_MARKER"

// gateReport is what TestNestGateRefusedHelper prints.
type gateReport struct {
	// First is the verdict on the first request (which moved the
	// launcher into its child's group).
	First host.NestAnswer
	// Code and Stderr are askNested's for the second request.
	Code   int
	Stderr string
	// Groups are the groups below the parent session's afterwards.
	Groups int
	// LauncherGone: the launcher's pid no longer exists.
	LauncherGone bool
	Err          string
}

// TestNestGateRefusedHelper starts a real nested launcher and names it
// in a first request, read by hand: the supervisor moves it into that
// child's group (and admits it), but the launcher is given no spec. Then
// the nested run's own client (askNested) asks for a second session with
// the same launcher, whose command would create the marker: the
// supervisor answers its spec, which the launcher takes and sets itself
// up with, and then refuses the move (the launcher is in another nested
// session now). It prints a gateReport.
func TestNestGateRefusedHelper(t *testing.T) {
	marker := os.Getenv(gateMarkerEnv)
	if marker == "" {
		return
	}
	var rep gateReport
	done := func(err error) {
		rep.Err = fmt.Sprint(err)
		b, _ := json.Marshal(rep)
		fmt.Println(string(b))
		os.Exit(0)
	}
	wd, _ := os.Getwd()
	l, err := session.StartNestedLauncher(os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		done(err)
	}
	pid := l.Pid()
	first, err := net.Dial("unix", os.Getenv(host.NestEnv))
	if err != nil {
		done(err)
	}
	defer first.Close()
	json.NewEncoder(first).Encode(host.NestRequest{Argv: []string{"true"}, Dir: wd, Launcher: pid, ExecGate: true})
	dec := json.NewDecoder(first)
	var spec host.NestAnswer
	if err := dec.Decode(&spec); err != nil || spec.Spec == nil {
		rep.First = spec
		done(fmt.Errorf("first request: no spec (%v)", err))
	}
	if err := dec.Decode(&rep.First); err != nil {
		done(fmt.Errorf("first request: no verdict: %w", err))
	}
	second, err := net.Dial("unix", os.Getenv(host.NestEnv))
	if err != nil {
		done(err)
	}
	defer second.Close()
	var errb bytes.Buffer
	req := host.NestRequest{Argv: []string{"sh", "-c", "echo ran > " + marker}, Dir: wd, Env: os.Environ()}
	rep.Code = askNested(context.Background(), streams{err: &errb}, second, l, req, phasetime.New(&errb))
	rep.Stderr = errb.String()
	rep.LauncherGone = syscall.Kill(pid, 0) == syscall.ESRCH
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		done(err)
	}
	var own string
	for _, line := range strings.Split(string(cg), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	entries, err := os.ReadDir(filepath.Join(mustCgroup2(t), own))
	for _, e := range entries {
		if e.IsDir() {
			rep.Groups++
		}
	}
	done(err)
}

// TestNestedSessionRefusedAfterSpec: the nested run hands the launcher
// its spec while the supervisor still moves it into the child's group,
// and the launcher sets itself up meanwhile; when the supervisor then
// refuses the launcher (here: its move, the launcher being in another
// nested session), the exec gate stays shut. The command never ran (its
// marker, in a directory it could write, is absent), the launcher is
// gone, so is the refused child's group, the run says why and exits
// with the refusal's status, and only the first child started.
func TestNestedSessionRefusedAfterSpec(t *testing.T) {
	w := newNestWorld(t)
	marker := filepath.Join(w.ws, "gate-marker")
	helper := []string{w.bin, "-test.run=^TestNestGateRefusedHelper$"}
	r := w.run(t, w.parent([]string{"--sandbox", "workspace-write"}, helper...), gateMarkerEnv+"="+marker)
	if r.code != 0 {
		t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	var got gateReport
	line, _, _ := strings.Cut(r.stdout, "\n")
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("the helper did not report (%v): stdout %q, stderr %q", err, r.stdout, r.stderr)
	}
	if got.Err != "<nil>" || !got.First.Admitted || got.First.Session == "" {
		t.Fatalf("the first request, naming the caller's own launcher, was not admitted: %+v", got)
	}
	// The spec reached the launcher before the verdict was read.
	sent, admitted := strings.Index(got.Stderr, "nested run: spec sent"), strings.Index(got.Stderr, "nested run: admitted")
	if sent < 0 || admitted < sent {
		t.Fatalf("the launcher was not given its spec before the verdict:\n%s", got.Stderr)
	}
	if got.Code != exitNoBoundary || !strings.Contains(got.Stderr, "nested session refused") || !strings.Contains(got.Stderr, "not in session") || !strings.Contains(got.Stderr, "nothing ran") {
		t.Errorf("the refused run exited %d, want %d with the refusal:\n%s", got.Code, exitNoBoundary, got.Stderr)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the refused child's command ran (%s: %v)", marker, err)
	}
	if !got.LauncherGone {
		t.Errorf("the refused child's launcher is still there")
	}
	if got.Groups != 1 {
		t.Errorf("%d groups below the parent session's after the refusal, want the first child's only", got.Groups)
	}
	if start := nestedStart(t, w.records(t)); start.Ox.Session != got.First.Session {
		t.Errorf("the nested session_start is %s's, want the first child's %s", start.Ox.Session, got.First.Session)
	}
}
