//go:build linux

package session_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/internal/companion"
	"github.com/openoxide/oxsupervise/session"
)

// installed copies oxsupervise, and the launcher program unless
// withLauncher is false, into a directory of their own (the layout of a
// build tree or of an installation's bin and libexec merged) and returns
// the oxsupervise there and the launcher's path.
func installed(t *testing.T, withLauncher bool) (exe, launcherPath string) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "oxs-launcher-layout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	exe = filepath.Join(dir, "oxsupervise")
	copyExecutable(t, bin, exe)
	launcherPath = filepath.Join(dir, companion.Launcher)
	if withLauncher {
		copyExecutable(t, launcherProgram, launcherPath)
	}
	return exe, launcherPath
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// sessionStart is the one session_start record of the log at path.
func sessionStart(t *testing.T, path string) audit.Record {
	t.Helper()
	var starts []audit.Record
	for _, r := range readAudit(t, path) {
		if r.Ox.Kind == audit.KindSessionStart {
			starts = append(starts, r)
		}
	}
	if len(starts) != 1 {
		t.Fatalf("%d session_start records in %s, want 1: %v", len(starts), path, starts)
	}
	return starts[0]
}

// TestRunUsesLauncherProgram: a session started by the built oxsupervise
// is launched by the launcher program built beside it (the layout `make
// build` and `make install` produce), not by oxsupervise re-executed, and
// its session_start record names that program.
func TestRunUsesLauncherProgram(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	log := filepath.Join(e.base, "audit.jsonl")
	r := e.run(t, nil, "run", "--", "sh", "-c", "echo ran")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "ran" {
		t.Fatalf("run: exit %d, stdout %q\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	start := sessionStart(t, log)
	if want := "; launcher " + launcherProgram; !strings.Contains(start.Message, want) {
		t.Errorf("session_start message %q does not name the launcher program (want %q)", start.Message, want)
	}
	if strings.Contains(start.Message, session.LauncherVerb) {
		t.Errorf("session_start message %q: the session was launched by oxsupervise re-executed", start.Message)
	}
}

// TestRunRefusesUncheckedLauncher: a launcher program beside oxsupervise
// that fails companion's check (writable by its group, or owned by another
// user) is not executed and not skipped over for the fallback: `run`
// exits 125 naming the file, and nothing of the command ran.
func TestRunRefusesUncheckedLauncher(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	for _, tc := range []struct {
		name   string
		tamper func(path string) error
		want   string
	}{
		{"group-writable", func(p string) error { return os.Chmod(p, 0o775) }, "writable by its group or by others"},
		{"other owner", func(p string) error { return os.Chown(p, 65534, 65534) }, "owned by uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			exe, launcherPath := installed(t, true)
			if err := tc.tamper(launcherPath); err != nil {
				t.Fatal(err)
			}
			e.bin = exe
			marker := filepath.Join(e.ws, "ran")
			r := e.run(t, nil, "run", "--", "touch", marker)
			if r.code != session.ExitNoBoundary {
				t.Errorf("run with a %s launcher: exit %d, want %d\nstderr:\n%s", tc.name, r.code, session.ExitNoBoundary, r.stderr)
			}
			if !strings.Contains(r.stderr, launcherPath) || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not name %s and why (%q):\n%s", launcherPath, tc.want, r.stderr)
			}
			if exists(marker) {
				t.Errorf("the command ran: %s exists", marker)
			}
		})
	}
}

// TestRunWorkspaceWriteSelfLauncher is TestRunWorkspaceWrite's refusals
// with no launcher program installed beside oxsupervise (a `go build` of
// cmd/oxsupervise alone): the supervisor re-executes itself as the
// launcher, and the session is confined the same.
func TestRunWorkspaceWriteSelfLauncher(t *testing.T) {
	exe, launcherPath := installed(t, false)
	if exists(launcherPath) {
		t.Fatalf("%s exists: the fallback cannot be tested", launcherPath)
	}
	log := runWorkspaceWrite(t, exe)
	start := sessionStart(t, log)
	if want := "; launcher " + exe + " " + session.LauncherVerb; !strings.Contains(start.Message, want) {
		t.Errorf("session_start message %q, want it to name oxsupervise re-executed (%q)", start.Message, want)
	}
}
