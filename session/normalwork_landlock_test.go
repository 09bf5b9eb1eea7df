//go:build linux

package session_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunNormalWorkDefaults runs, in a default workspace-write session on
// this kernel's path, the everyday work the Landlock path's extra layers
// (read-only view, no capabilities, seccomp, quarantine) must not break,
// with no configuration at all: go build with the default cache, npm
// install of a local package, git commit, git worktree add, python3 -m
// venv and multiprocessing locks. The tool caches land in the sandbox
// cache, and the user's own ~/.cache/go-build and ~/.npm are not written.
func TestRunNormalWorkDefaults(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	e.git(t, "add", "file.txt")
	e.git(t, "commit", "-qm", "base")
	if err := os.MkdirAll(filepath.Join(e.ws, "hello"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(e.ws, "hello", "go.mod"), "module example.test/hello\n\ngo 1.21\n")
	mustWrite(t, filepath.Join(e.ws, "hello", "main.go"), "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello from a session\") }\n")
	if err := os.MkdirAll(filepath.Join(e.ws, "localpkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(e.ws, "localpkg", "package.json"), `{"name":"localpkg","version":"1.0.0","main":"index.js"}`+"\n")
	mustWrite(t, filepath.Join(e.ws, "localpkg", "index.js"), "module.exports = 42;\n")
	mustWrite(t, filepath.Join(e.ws, "package.json"), `{"name":"app","version":"1.0.0"}`+"\n")

	goBin, goErr := exec.LookPath("go")
	_, npmErr := exec.LookPath("npm")
	venvErr := exec.Command("python3", "-m", "venv", "--help").Run()
	steps := []struct {
		name, script string
		skip         error
	}{
		{"go-build", "cd hello && GOTELEMETRY=off GOFLAGS=-mod=mod " + goBin + " build -o hello . && ./hello", goErr},
		{"npm-install", "npm install --no-audit --no-fund --offline ./localpkg && node -e 'process.exit(require(\"localpkg\") === 42 ? 0 : 1)'", npmErr},
		{"git-commit", "echo change >> file.txt && git commit -qam 'from session'", nil},
		{"git-worktree", "git worktree add -q wt && test -f wt/file.txt", nil},
		{"venv", "python3 -m venv .venv && .venv/bin/python -c 'import sys; print(sys.prefix)'", venvErr},
		{"mp-lock", `python3 -c 'import multiprocessing as m; l = m.Lock(); l.acquire(); l.release(); q = m.Queue(); q.put(1); assert q.get() == 1'`, venvErr},
	}
	var script strings.Builder
	for _, s := range steps {
		if s.skip != nil {
			t.Logf("!!! %s step SKIPPED (tool missing on this machine: %v)", s.name, s.skip)
			continue
		}
		fmt.Fprintf(&script, "if (%s) >step.out 2>&1; then echo %s=ok; else echo %s=FAILED; cat step.out; fi\n", s.script, s.name, s.name)
	}
	script.WriteString("rm -f step.out\n")
	r := e.run(t, []string{"OXSUPERVISE_QUARANTINE_DIR=" + filepath.Join(e.base, "quarantine")}, "run", "--", "sh", "-c", script.String())
	if r.code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range steps {
		if s.skip == nil && !strings.Contains(r.stdout, s.name+"=ok") {
			t.Errorf("%s failed inside the session:\n%s\nstderr:\n%s", s.name, r.stdout, r.stderr)
		}
	}
	sandbox := filepath.Join(e.home, ".cache", "oxsupervise-sandbox")
	for _, own := range []string{filepath.Join(e.home, ".cache", "go-build"), filepath.Join(e.home, ".npm"), filepath.Join(e.home, "go")} {
		if exists(own) {
			t.Errorf("the user's own cache %s was written by the session", own)
		}
	}
	if goErr == nil {
		if entries, _ := os.ReadDir(filepath.Join(sandbox, "go-build")); len(entries) == 0 {
			t.Errorf("the sandbox Go build cache %s is empty after go build", filepath.Join(sandbox, "go-build"))
		}
	}
	if log := e.git(t, "log", "--oneline"); !strings.Contains(log, "from session") {
		t.Errorf("git commit inside the session did not land:\n%s", log)
	}
	if out := e.git(t, "worktree", "list"); !strings.Contains(out, filepath.Join(e.ws, "wt")) {
		t.Errorf("git worktree list after the session:\n%s", out)
	}
	if exists(filepath.Join(e.base, "quarantine")) {
		entries, _ := filepath.Glob(filepath.Join(e.base, "quarantine", "*", "*"))
		t.Errorf("normal work had entries quarantined: %v", entries)
	}
}
