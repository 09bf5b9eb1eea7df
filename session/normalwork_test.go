//go:build linux

package session_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/internal/testutil/normalwork"
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

	// Go's build cache here is one in /tmp (a writable root), not the
	// sandbox cache the default-cache table (normalwork) proves.
	steps := []normalwork.Step{
		{Name: "tar", Script: "tar xf " + archive},
		{Name: "make", Script: "make -s out.txt"},
		{Name: "venv", Script: "python3 -m venv .venv && .venv/bin/python -c 'import sys; print(sys.prefix)'", Skip: venvErr},
		{Name: "go-build", Script: "cd hello && GOCACHE=" + gocache + " GOTELEMETRY=off GOFLAGS=-mod=mod " + goBin + " build -o hello . && ./hello", Skip: goErr},
	}
	script := normalwork.Script(t, steps)
	r := e.run(t, nil, "run", "--sandbox", "workspace-write", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	normalwork.CheckOutput(t, steps, r.stdout, r.stderr)
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
