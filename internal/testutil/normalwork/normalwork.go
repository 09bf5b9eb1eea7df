// Package normalwork is the one table of everyday work a default
// workspace-write session must not break (issue #20's Done-when): go build
// with the default cache, npm install of a local package, python3 -m venv
// and pip install into it, git commit, git worktree add and a commit in
// the worktree, Python multiprocessing locks, a glibc thread and
// posix_spawn. The Landlock path's test (package session, on the host)
// and the BPF-LSM path's (session/fsvmtest, in the kernel-test VM) run
// the same steps and check the same state afterwards; each adds what only
// its path has. Every tool a step needs is probed first, with the PATH
// the session gets, and a missing one is logged as SKIPPED, never passed.
package normalwork

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Step is one piece of work, a shell script run in the workspace.
type Step struct {
	Name, Script string
	// Skip says why the step cannot run here (its tool is missing).
	Skip error
}

// Options say where the tools are.
type Options struct {
	// Go is the go binary; "" looks it up in Path.
	Go string
	// Path is the PATH the session's commands get.
	Path string
	// SlowCPU is the kernel-test VM's software CPU, where two steps as a
	// user runs them take minutes each: go build compiles a package that
	// imports nothing (still a go build, through the default cache)
	// instead of linking a program (a cold cache compiles the runtime),
	// and the venv is made without pip, the system's pip installing into
	// it (--python) instead of the venv's (ensurepip).
	SlowCPU bool
}

// SandboxCache is where session/caches_linux.go puts a session's tool
// caches, below the user's home.
const SandboxCache = ".cache/oxsupervise-sandbox"

// Prepare writes what the steps work on into ws, a git repository whose
// file.txt is committed, and returns the steps.
func Prepare(t testing.TB, ws string, o Options) []Step {
	t.Helper()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A main package that imports nothing: the least a cold build cache
	// has to compile (the runtime), so the build finishes under the test
	// VM's software CPU too.
	write("hello/go.mod", "module example.test/hello\n\ngo 1.21\n")
	write("hello/main.go", "package main\n\nfunc main() { println(\"hello from a session\") }\n")
	write("hello/lib/lib.go", "package lib\n\n// Answer is what the session's build compiled.\nfunc Answer() int { return 42 }\n")
	write("localpkg/package.json", `{"name":"localpkg","version":"1.0.0","main":"index.js"}`+"\n")
	write("localpkg/index.js", "module.exports = 42;\n")
	write("package.json", `{"name":"app","version":"1.0.0"}`+"\n")
	// A wheel built here: pip installs it offline with nothing but itself
	// (a source package would need setuptools and wheel in the venv).
	if err := os.WriteFile(filepath.Join(ws, wheelName), wheel(t), 0o644); err != nil {
		t.Fatal(err)
	}

	env := []string{"PATH=" + o.Path}
	look := func(name string) (string, error) {
		for _, dir := range filepath.SplitList(o.Path) {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s not in PATH %s", name, o.Path)
	}
	goBin, goErr := o.Go, error(nil)
	if goBin == "" {
		goBin, goErr = look("go")
	} else if _, err := os.Stat(goBin); err != nil {
		goErr = err
	}
	_, npmErr := look("npm")
	python, pyErr := look("python3")
	if pyErr == nil {
		probe := exec.Command(python, "-m", "venv", "--help")
		probe.Env = env
		if err := probe.Run(); err != nil {
			pyErr = fmt.Errorf("%s -m venv: %w", python, err)
		}
	}
	goBuild := "cd hello && GOTELEMETRY=off GOFLAGS=-mod=mod " + goBin + " build -o hello . && ./hello"
	venv, pip := "python3 -m venv .venv", ".venv/bin/python -m pip"
	if o.SlowCPU {
		t.Logf("!!! slow CPU: go build compiles an import-free package without linking a program, and pip installs into a venv made --without-pip from outside it; the full forms run on the host (TestRunNormalWorkDefaults)")
		goBuild = "cd hello && GOTELEMETRY=off GOFLAGS=-mod=mod " + goBin + " build ./lib"
		venv, pip = "python3 -m venv --without-pip .venv", "python3 -m pip --python .venv/bin/python"
	}
	return []Step{
		{"go-build", goBuild, goErr},
		{"npm-install", "npm install --no-audit --no-fund --offline ./localpkg && node -e 'process.exit(require(\"localpkg\") === 42 ? 0 : 1)'", npmErr},
		{"git-commit", "echo change >> file.txt && git commit -qam 'from session'", nil},
		{"git-worktree", "git worktree add -q wt && test -f wt/file.txt && echo more >> wt/file.txt && git -C wt commit -qam 'in worktree'", nil},
		{"venv", venv + " && .venv/bin/python -c 'import sys; print(sys.prefix)'", pyErr},
		{"pip-install", pip + " install --no-index --no-input --disable-pip-version-check -q ./" + wheelName +
			" && .venv/bin/python -c 'import localpy; assert localpy.ANSWER == 42'", pyErr},
		{"mp-lock", `python3 -c 'import multiprocessing as m; l = m.Lock(); l.acquire(); l.release(); q = m.Queue(); q.put(1); assert q.get() == 1'`, pyErr},
		// glibc's pthread_create and posix_spawn try clone3 first, which
		// the session's seccomp filter answers with ENOSYS: both must fall
		// back to clone(2).
		{"glibc-thread-spawn", `python3 -c 'import os, threading; t = threading.Thread(target=print, args=("thread",)); t.start(); t.join(); pid = os.posix_spawn("/bin/sh", ["sh", "-c", "exit 7"], dict(os.environ)); assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7'`, pyErr},
	}
}

// Script is the shell script that runs steps in order, printing NAME=ok or
// NAME=FAILED followed by the step's output.
func Script(t testing.TB, steps []Step) string {
	t.Helper()
	var b strings.Builder
	for _, s := range steps {
		if s.Skip != nil {
			t.Logf("!!! %s step SKIPPED, NOT PASSED (tool missing here: %v)", s.Name, s.Skip)
			continue
		}
		fmt.Fprintf(&b, "if (%s) >step.out 2>&1; then echo %s=ok; else echo %s=FAILED; cat step.out; fi\n", s.Script, s.Name, s.Name)
	}
	b.WriteString("rm -f step.out\n")
	return b.String()
}

// CheckOutput fails t for every step that ran and did not succeed.
func CheckOutput(t testing.TB, steps []Step, stdout, stderr string) {
	t.Helper()
	for _, s := range steps {
		if s.Skip == nil && !strings.Contains(stdout, s.Name+"=ok") {
			t.Errorf("%s failed inside the session:\n%s\nstderr:\n%s", s.Name, stdout, stderr)
		}
	}
}

// CheckAfter checks, once the session ended, that the work is where the
// tools put it, that the tool caches were the sandbox's (below home) and
// that the user's own caches were not written. git runs git in ws; o are
// Prepare's options.
func CheckAfter(t testing.TB, steps []Step, o Options, ws, home string, git func(args ...string) string) {
	t.Helper()
	ran := map[string]bool{}
	for _, s := range steps {
		ran[s.Name] = s.Skip == nil
	}
	for _, own := range []string{".cache/go-build", ".npm", "go", ".cache/pip"} {
		if _, err := os.Lstat(filepath.Join(home, own)); err == nil {
			t.Errorf("the user's own cache ~/%s was written by the session", own)
		}
	}
	if ran["go-build"] {
		dir := filepath.Join(home, SandboxCache, "go-build")
		if entries, _ := os.ReadDir(dir); len(entries) == 0 {
			t.Errorf("the sandbox Go build cache %s is empty after go build: the build did not use the default (sandbox) cache", dir)
		}
		if _, err := os.Stat(filepath.Join(ws, "hello", "hello")); err != nil && !o.SlowCPU {
			t.Errorf("the built binary: %v", err)
		}
	}
	if ran["npm-install"] {
		if _, err := os.Stat(filepath.Join(ws, "node_modules", "localpkg", "package.json")); err != nil {
			t.Errorf("node_modules/localpkg after npm install: %v", err)
		}
	}
	if ran["pip-install"] {
		matches, _ := filepath.Glob(filepath.Join(ws, ".venv", "lib", "python3*", "site-packages", "localpy", "__init__.py"))
		if len(matches) == 0 {
			t.Errorf("localpy is not in the venv's site-packages after pip install")
		}
	}
	if log := git("log", "--oneline"); !strings.Contains(log, "from session") {
		t.Errorf("git commit inside the session did not land:\n%s", log)
	}
	if out := git("worktree", "list"); !strings.Contains(out, filepath.Join(ws, "wt")) {
		t.Errorf("git worktree list after the session:\n%s", out)
	}
	if log := git("-C", "wt", "log", "--oneline"); !strings.Contains(log, "in worktree") {
		t.Errorf("the commit in the worktree did not land:\n%s", log)
	}
}

const wheelName = "localpy-1.0-py3-none-any.whl"

// wheel builds the wheel of a package localpy (ANSWER = 42), its RECORD
// with the hashes pip checks.
func wheel(t testing.TB) []byte {
	t.Helper()
	files := []struct{ name, body string }{
		{"localpy/__init__.py", "ANSWER = 42\n"},
		{"localpy-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: localpy\nVersion: 1.0\n"},
		{"localpy-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: oxsupervise-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("localpy-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create("localpy-1.0.dist-info/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
