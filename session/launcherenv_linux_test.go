//go:build linux

package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// environLayer is an exec-gated layer that reads the launcher's
// environment at the gate.
type environLayer struct {
	environ []string
	err     error
}

func (e *environLayer) Name() string         { return "fake-environ" }
func (e *environLayer) activatesBeforeExec() {}

func (e *environLayer) Apply(ctx context.Context, s SessionInfo) (func(context.Context) error, error) {
	b, err := os.ReadFile(filepath.Join(s.CgroupPath, "cgroup.procs"))
	if err == nil {
		if pids := strings.Fields(string(b)); len(pids) == 1 {
			b, err = os.ReadFile("/proc/" + pids[0] + "/environ")
			e.environ = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		}
	}
	e.err = err
	return func(context.Context) error { return nil }, nil
}

// TestLauncherEnvironment: the launcher runs with launcherEnv alone (one
// P for its Go runtime), and the command gets the session's environment,
// without it.
func TestLauncherEnvironment(t *testing.T) {
	c, ws, self, reg := gateTestSession(t, "oxs-env-")
	out := filepath.Join(ws, "env")
	l := &environLayer{}
	code, err := Run(context.Background(), RunOptions{
		Policy: c, Argv: []string{"sh", "-c", `printf %s "${GOMAXPROCS-unset}" > "$0"`, out}, Env: []string{"PATH=/usr/bin:/bin"},
		Dir: ws, SelfExe: self, Registry: reg, Layers: []SessionLayer{l},
	})
	if err != nil || code != 0 {
		t.Fatalf("Run: exit %d, %v", code, err)
	}
	if l.err != nil {
		t.Fatalf("the launcher's environment at the gate: %v", l.err)
	}
	if strings.Join(l.environ, " ") != "GOMAXPROCS=1" {
		t.Errorf("the launcher's environment at the gate is %q, want [GOMAXPROCS=1]", l.environ)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the command's output: %v", err)
	}
	if string(got) != "unset" {
		t.Errorf("the command sees GOMAXPROCS=%q, want it unset (the session's environment)", got)
	}
}
