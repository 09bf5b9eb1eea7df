//go:build linux

package session_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/openoxide/oxsupervise/internal/testutil/normalwork"
)

// TestRunNormalWorkDefaults runs, in a default workspace-write session on
// this kernel's path, the everyday work the Landlock path's extra layers
// (read-only view, no capabilities, seccomp, quarantine) must not break,
// with no configuration at all: package normalwork's table (go build with
// the default cache, npm install of a local package, pip install into a
// venv, git commit, git worktree add, multiprocessing locks), which
// session/fsvmtest runs on the BPF-LSM path. The tool caches land in the
// sandbox cache, and the user's own ~/.cache/go-build and ~/.npm are not
// written.
func TestRunNormalWorkDefaults(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	e.git(t, "add", "file.txt")
	e.git(t, "commit", "-qm", "base")
	o := normalwork.Options{Path: os.Getenv("PATH")}
	steps := normalwork.Prepare(t, e.ws, o)
	r := e.run(t, []string{"OXSUPERVISE_QUARANTINE_DIR=" + filepath.Join(e.base, "quarantine")}, "run", "--", "sh", "-c", normalwork.Script(t, steps))
	if r.code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	normalwork.CheckOutput(t, steps, r.stdout, r.stderr)
	normalwork.CheckAfter(t, steps, o, e.ws, e.home, func(args ...string) string { return e.git(t, args...) })
	if exists(filepath.Join(e.base, "quarantine")) {
		entries, _ := filepath.Glob(filepath.Join(e.base, "quarantine", "*", "*"))
		t.Errorf("normal work had entries quarantined: %v", entries)
	}
}
