//go:build linux

package session_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// fakeLayer stands in for BPF-LSM or network programs.
type fakeLayer struct {
	name     string
	fail     error
	applied  *session.SessionInfo
	tornDown bool
}

func (l *fakeLayer) Name() string { return l.name }

func (l *fakeLayer) Apply(ctx context.Context, s session.SessionInfo) (func(context.Context) error, error) {
	l.applied = &s
	if l.fail != nil {
		return nil, l.fail
	}
	return func(context.Context) error { l.tornDown = true; return nil }, nil
}

func compiledFor(t *testing.T, e *env) *policy.Compiled {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(e.ws, &st); err != nil {
		t.Fatal(err)
	}
	ws := policy.Anchor{Path: e.ws, Dev: st.Dev, Ino: st.Ino, Dir: true, Exists: true}
	return &policy.Compiled{
		SchemaVersion: policy.CompiledSchemaVersion, Mode: policy.ModeWorkspaceWrite, FilesystemRules: true,
		ReadAccess: policy.ReadAccessFull, Workspace: ws, WritableRoots: []policy.Anchor{ws},
		DenyRead: []policy.Anchor{{Path: filepath.Join(e.home, ".ssh"), Exists: true, Dir: true}},
		Env:      policy.Env{Scrub: []string{"*_TOKEN"}},
		Audit:    policy.Audit{Path: filepath.Join(e.base, "audit.jsonl")},
	}
}

func TestRunAppliesSessionLayers(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	cg2 := cgroup2Mount(t)
	e := newEnv(t)
	self := selfExe(t)
	reg := session.Registry{Dir: filepath.Join(e.base, "registry")}
	opts := func(layers ...session.SessionLayer) session.RunOptions {
		return session.RunOptions{
			Policy: compiledFor(t, e),
			Argv:   []string{"sh", "-c", `grep '^0::' /proc/self/cgroup > cgroup.txt; echo "$API_TOKEN" > token.txt; cat "$HOME/.ssh/canary" > canary.txt`},
			Env:    []string{"PATH=/usr/bin:/bin", "HOME=" + e.home, "API_TOKEN=leak"},
			Dir:    e.ws, SelfExe: self, Registry: reg, Layers: layers,
		}
	}

	ok := &fakeLayer{name: "fake-ok"}
	code, err := session.Run(context.Background(), opts(ok))
	if err != nil || code != 1 { // cat of the canary fails, so the script exits 1
		t.Fatalf("Run: code %d, %v", code, err)
	}
	if ok.applied == nil || !ok.tornDown {
		t.Fatalf("layer applied %v, torn down %v", ok.applied != nil, ok.tornDown)
	}
	if got := strings.TrimSpace(mustRead(t, filepath.Join(e.ws, "cgroup.txt"))); got != "0::/oxsupervise/"+ok.applied.ID {
		t.Errorf("command ran in %q, want the session %s the layer was given", got, ok.applied.ID)
	}
	if !strings.HasPrefix(ok.applied.CgroupPath, cg2) || ok.applied.CgroupID == 0 {
		t.Errorf("SessionInfo %+v", *ok.applied)
	}
	if got := strings.TrimSpace(mustRead(t, filepath.Join(e.ws, "token.txt"))); got != "" {
		t.Errorf("API_TOKEN reached the command: %q", got)
	}
	if got := mustRead(t, filepath.Join(e.ws, "canary.txt")); got != "" {
		t.Errorf("canary readable: %q", got)
	}
	if exists(ok.applied.CgroupPath) {
		t.Errorf("cgroup %s left behind", ok.applied.CgroupPath)
	}

	failing := &fakeLayer{name: "fake-fail", fail: errors.New("probe refused")}
	marker := filepath.Join(e.ws, "marker")
	o := opts(failing)
	o.Argv = []string{"touch", marker}
	_, err = session.Run(context.Background(), o)
	var be *session.BoundaryError
	if !errors.As(err, &be) || be.Layer != "fake-fail" {
		t.Fatalf("Run with a failing layer: %v, want a BoundaryError naming fake-fail", err)
	}
	if exists(marker) {
		t.Error("the command ran although a layer failed")
	}
	if failing.applied == nil {
		t.Fatal("the failing layer was never asked")
	}
	if exists(failing.applied.CgroupPath) {
		t.Errorf("session cgroup %s left behind", failing.applied.CgroupPath)
	}
	if entries, _ := os.ReadDir(reg.Dir); len(entries) != 0 {
		t.Errorf("registry entries left behind: %v", entries)
	}
}
