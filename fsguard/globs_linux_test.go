//go:build linux

package fsguard_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/policy"
)

// Deny-read globs (the default: .env* except .env.example, below the
// workspace) are matched by name in the kernel, so files created during
// the session are covered and a second name cannot launder one.
func TestDenyReadGlobs(t *testing.T) {
	g := loadGuard(t)
	ev := collectEvents(t, g)
	ws, out := realTempDir(t), realTempDir(t)
	for _, f := range []string{".env", "sub/.env.local", ".env.example", "envfile", "rw/.env"} {
		writeFile(t, filepath.Join(ws, f), "secret")
	}
	writeFile(t, filepath.Join(out, ".env"), "elsewhere")
	c := workspacePolicy(t, ws, nil, nil)
	c.DenyReadGlobs = []policy.NameGlob{{Within: ws, Include: ".env*", Exclude: []string{".env.example"}, Source: "test"}}
	cg := testutil.NewCgroup(t)
	if err := g.AddSession(cg.ID, c); err != nil {
		t.Fatalf("AddSession: %v", err)
	}
	t.Cleanup(func() { g.RemoveSession(cg.ID) })

	p := func(rel string) string { return filepath.Join(ws, rel) }
	tests := []struct {
		name  string
		op    string
		args  []string
		want  syscall.Errno
		event fsguard.Op
		path  string // of the event
	}{
		{"read .env", "read", []string{p(".env")}, unix.EACCES, fsguard.OpOpenRead, p(".env")},
		{"read nested .env.local", "read", []string{p("sub/.env.local")}, unix.EACCES, fsguard.OpOpenRead, p("sub/.env.local")},
		{"read the exception", "read", []string{p(".env.example")}, 0, 0, ""},
		{"read a name without the prefix", "read", []string{p("envfile")}, 0, 0, ""},
		{"read .env outside the scope", "read", []string{filepath.Join(out, ".env")}, 0, 0, ""},
		{"overwrite .env without reading", "write", []string{p("rw/.env"), "new"}, 0, 0, ""},
		{"rename .env away", "rename", []string{p(".env"), p("plain")}, unix.EACCES, fsguard.OpRenameSource, p(".env")},
		{"hard link .env", "link", []string{p(".env"), p("alias")}, unix.EACCES, fsguard.OpLinkSource, p(".env")},
		{"create then read a new .env", "mkdirp-write", []string{p("fresh"), ".env.new"}, 0, 0, ""},
		{"read the new .env", "read", []string{p("fresh/.env.new")}, unix.EACCES, fsguard.OpOpenRead, p("fresh/.env.new")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inCgroup(t, &cg, tt.op, tt.args...); got != tt.want {
				t.Fatalf("%s %v: errno %v, want %v", tt.op, tt.args, got, tt.want)
			}
			if tt.want == 0 {
				return
			}
			e := ev.waitFor(t, cg.ID, tt.event, tt.path)
			if e.Kind != fsguard.KindDenyGlob || e.Errno != tt.want || !strings.Contains(e.Rule, ".env*") {
				t.Fatalf("event %+v: want kind %v naming the glob", e, fsguard.KindDenyGlob)
			}
		})
	}
	checkContent(t, p(".env"), "secret")
	checkContent(t, p("rw/.env"), "new")
	for _, gone := range []string{"plain", "alias"} {
		if exists(p(gone)) {
			t.Errorf("%s exists after the refused rename/link", gone)
		}
	}
}
