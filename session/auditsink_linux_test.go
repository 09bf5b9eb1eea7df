//go:build linux

package session_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/session"
)

// openFDsOf counts this process's descriptors open on path.
func openFDsOf(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// A session has one audit sink: Run opens the log once and hands that sink
// to every layer, and the supervisor's own records go through it too.
func TestRunOpensTheAuditLogOnce(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	cgroup2Mount(t)
	e := newEnv(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := compiledFor(t, e)
	layers := []*fakeLayer{{name: "one"}, {name: "two"}}
	fds := -1
	code, err := session.Run(context.Background(), session.RunOptions{
		Policy: c, Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + e.home},
		Dir: e.ws, SelfExe: self, Registry: session.Registry{Dir: filepath.Join(e.base, "registry")},
		Layers:  []session.SessionLayer{layers[0], layers[1]},
		OnStart: func(session.SessionInfo) { fds = openFDsOf(t, c.Audit.Path) },
	})
	if err != nil || code != 0 {
		t.Fatalf("Run: code %d, %v", code, err)
	}
	if fds != 1 {
		t.Errorf("%d descriptors open on the audit log while the session ran, want 1", fds)
	}
	for _, l := range layers {
		if l.applied == nil || l.applied.Audit == nil || l.applied.Audit != layers[0].applied.Audit {
			t.Fatalf("layer %s was not given the session's sink: %+v", l.name, l.applied)
		}
		if l.applied.Audit.Path() != c.Audit.Path {
			t.Errorf("layer %s sink writes %s, want %s", l.name, l.applied.Audit.Path(), c.Audit.Path)
		}
	}
	if n := openFDsOf(t, c.Audit.Path); n != 0 {
		t.Errorf("%d descriptors still open on the audit log after Run", n)
	}
	var kinds []audit.Kind
	for _, r := range readAudit(t, c.Audit.Path) {
		kinds = append(kinds, r.Ox.Kind)
	}
	if len(kinds) != 2 || kinds[0] != audit.KindSessionStart || kinds[1] != audit.KindSessionStop {
		t.Errorf("audit log holds %v, want session_start then session_stop", kinds)
	}
}
