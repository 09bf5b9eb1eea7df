//go:build linux

package session_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// TestRunNormalWork proves the boundary does not break what an agent is
// there to do: unpacking an archive, make, a Python virtual environment and
// a Go build, all inside the workspace of a workspace-write session (the
// Landlock layer on this kernel). A sandbox that breaks builds gets turned
// off, which is a failure too.
func TestRunNormalWork(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)

	// The archive lives outside every writable root: reading it is allowed.
	archive := filepath.Join(e.outside, "src.tar")
	testutil.WriteTar(t, archive, map[string]string{"pkg/a.txt": "alpha\n", "pkg/deep/b.txt": "beta\n"})
	mustWrite(t, filepath.Join(e.ws, "Makefile"), "out.txt: file.txt\n\tcp file.txt out.txt\n")
	if err := os.MkdirAll(filepath.Join(e.ws, "hello"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(e.ws, "hello", "go.mod"), "module example.test/hello\n\ngo 1.21\n")
	mustWrite(t, filepath.Join(e.ws, "hello", "main.go"), "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello from a session\") }\n")

	goBin, goErr := exec.LookPath("go")
	venvErr := exec.Command("python3", "-m", "venv", "--help").Run()
	gocache := filepath.Join("/tmp", fmt.Sprintf("oxs-test-gocache-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.RemoveAll(gocache) })

	steps := []struct {
		name, script string
		skip         error // an independent probe says the tool is missing
	}{
		{"tar", "tar xf " + archive, nil},
		{"make", "make -s out.txt", nil},
		{"venv", "python3 -m venv .venv && .venv/bin/python -c 'import sys; print(sys.prefix)'", venvErr},
		// Go's build cache normally lives in $HOME/.cache, outside the
		// writable roots; /tmp is one.
		{"go-build", "cd hello && GOCACHE=" + gocache + " GOTELEMETRY=off GOFLAGS=-mod=mod " + goBin + " build -o hello . && ./hello", goErr},
	}
	var script strings.Builder
	for _, s := range steps {
		if s.skip != nil {
			t.Logf("!!! %s step SKIPPED (tool missing on this machine: %v)", s.name, s.skip)
			continue
		}
		fmt.Fprintf(&script, "if (%s) >/dev/null 2>step.err; then echo %s=ok; else echo %s=FAILED; cat step.err; fi\n", s.script, s.name, s.name)
	}
	script.WriteString("rm -f step.err\n")
	r := e.run(t, nil, "run", "--sandbox", "workspace-write", "--", "sh", "-c", script.String())
	if r.code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range steps {
		if s.skip != nil {
			continue
		}
		if !strings.Contains(r.stdout, s.name+"=ok") {
			t.Errorf("%s failed inside the session:\n%s\nstderr:\n%s", s.name, r.stdout, r.stderr)
		}
	}
	for path, want := range map[string]string{
		"pkg/a.txt":      "alpha\n",
		"pkg/deep/b.txt": "beta\n",
		"out.txt":        "tracked\n",
	} {
		if got, err := os.ReadFile(filepath.Join(e.ws, path)); err != nil || string(got) != want {
			t.Errorf("%s after the session: %q, %v; want %q", path, got, err, want)
		}
	}
	if venvErr == nil && !exists(filepath.Join(e.ws, ".venv", "bin", "python")) {
		t.Error(".venv/bin/python missing after the session")
	}
	if goErr == nil && !exists(filepath.Join(e.ws, "hello", "hello")) {
		t.Error("hello binary missing after the session")
	}
}
