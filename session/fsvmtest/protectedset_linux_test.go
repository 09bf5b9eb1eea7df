//go:build linux

package fsvmtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunBPFLSMRefusesProtectedSet: on the BPF-LSM path, `oxsupervise run`
// refuses the first creation of the protected set's newer entries (the
// agents' and tools' project files, a two-component name below a
// directory the session may create, and the pattern bind time derives from
// a core.hooksPath that does not exist yet) with EACCES, leaves nothing
// behind and audits each; the existing directory core.hooksPath names
// refuses new hooks and changes of old ones; git commit still runs that
// hook.
func TestRunBPFLSMRefusesProtectedSet(t *testing.T) {
	requireBPFLSM(t)
	e := newEnv(t)
	hook := "#!/bin/sh\necho ran > hook-ran\n"
	e.git(t, "config", "core.hooksPath", "tools/githooks")
	if err := os.MkdirAll(filepath.Join(e.ws, "tools", "githooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(e.ws, "tools", "githooks", "pre-commit"), hook)
	if err := os.Chmod(filepath.Join(e.ws, "tools", "githooks", "pre-commit"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.git(t, "init", "-q", "hooked")
	e.git(t, "-C", "hooked", "config", "core.hooksPath", ".githooks")

	created := []struct {
		name, op, path, action string
	}{
		{"devcontainer", "mkdir", ".devcontainer", "mkdir"},
		{"opencode-json", "write", "opencode.json", "create"},
		{"copilot-instructions", "write", ".github/copilot-instructions.md", "create"},
		{"pre-commit-config", "write", ".pre-commit-config.yaml", "create"},
		{"missing-hooks-path", "mkdir", "hooked/.githooks", "mkdir"},
		{"hooks-path-new-hook", "write", "tools/githooks/post-checkout", "create"},
	}
	var script strings.Builder
	// .github itself is no protected name: only what goes below it.
	script.WriteString("mkdir .github\n")
	for _, c := range created {
		fmt.Fprintf(&script, "printf '%%s=' %s; \"$SELF\" %s %s %s\n", c.name, fsopVerb, c.op, c.path)
	}
	fmt.Fprintf(&script, "printf 'hooks-path-change='; \"$SELF\" %s write tools/githooks/pre-commit\n", fsopVerb)
	script.WriteString("git add file.txt && git commit -q -m session >/dev/null 2>&1 && echo commit=OK\n")
	code, stdout, stderr := e.runCLI(t, nil, script.String())
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(stdout, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	id, _ := sessionOf(t, e.auditLog, 0)
	for _, c := range created {
		p := filepath.Join(e.ws, c.path)
		if got[c.name] != "EACCES" {
			t.Errorf("%s: %s %s: %q, want EACCES", c.name, c.op, c.path, got[c.name])
		}
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %s exists after the refusal (%v)", c.name, c.path, err)
		}
		expectDenial(t, e.auditLog, id, c.action, p)
	}
	// The hook exists: BPF-LSM refuses the change by inode (the mount
	// namespace does not hold protected entries read-only on this path,
	// which would refuse with EROFS and no audit record).
	hookPath := filepath.Join(e.ws, "tools", "githooks", "pre-commit")
	if got["hooks-path-change"] != "EACCES" {
		t.Errorf("changing the core.hooksPath hook: %q, want EACCES", got["hooks-path-change"])
	}
	expectDenial(t, e.auditLog, id, "open", hookPath)
	if b, err := os.ReadFile(hookPath); err != nil || string(b) != hook {
		t.Errorf("the core.hooksPath hook changed: %q, %v", b, err)
	}
	if !strings.Contains(stdout, "commit=OK") || read(t, filepath.Join(e.ws, "hook-ran")) != "ran" {
		t.Errorf("git commit with the protected core.hooksPath failed or its hook did not run:\n%s\n%s", stdout, stderr)
	}
}
