//go:build linux

package fsvmtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
)

// TestGitFilesBPFLSM: on the BPF-LSM path a session may create the .git
// files git writes for normal work (git worktree add; a submodule's .git
// file) and a new worktree's commondir, while rewriting one that exists
// stays refused, and at the session's end each such entry it created that
// points git at a directory of its choosing is moved to quarantine with
// an audit record — also when the session renamed the directory it lies
// in, and whatever it left in the way of the check.
func TestGitFilesBPFLSM(t *testing.T) {
	requireBPFLSM(t)
	e := newEnv(t)
	qdir := filepath.Join(e.base, "quarantine")
	e.git(t, "add", "file.txt")
	e.git(t, "commit", "-qm", "base")
	// A worktree and a submodule's git directory from before the session.
	e.git(t, "worktree", "add", "-q", "pre")
	preGit := read(t, filepath.Join(e.ws, "pre", ".git"))
	if err := os.MkdirAll(filepath.Join(e.ws, ".git", "modules", "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(e.outside, "evil-gitdir")
	if err := os.MkdirAll(evil, 0o755); err != nil {
		t.Fatal(err)
	}
	// Each step prints NAME=RESULT (want: one of |-separated results);
	// fsop prints OK or the errno's name. An entry from before the session
	// is also bound read-only in the session's mount namespace (EROFS).
	steps := []struct{ name, script, want string }{
		{"worktree-add", "git worktree add -q wt && test -f wt/file.txt && echo ok", "ok"},
		{"worktree-commit", "echo more >> wt/file.txt && git -C wt commit -qam 'in wt' && echo ok", "ok"},
		{"submodule-git-file", "mkdir lib && printf 'gitdir: ../.git/modules/lib\\n' > lib/.git && echo ok", "ok"},
		{"evil-git-file", "mkdir sub && printf 'gitdir: " + evil + "\\n' > sub/.git && echo ok", "ok"},
		{"evil-git-file-renamed-away", "mkdir carrier && printf 'gitdir: " + evil + "\\n' > carrier/.git && mv carrier moved && echo ok", "ok"},
		{"evil-commondir", "mkdir -p .git/worktrees/evil && printf '" + e.outside + "\\n' > .git/worktrees/evil/commondir && echo ok", "ok"},
		// Rewrites: the .git file and commondir git worktree add made a
		// moment ago (nothing but BPF-LSM covers them), and the ones of
		// the worktree from before the session.
		{"rewrite-new-git-file", `"$SELF" ` + fsopVerb + ` write wt/.git`, "EACCES"},
		{"rewrite-new-commondir", `"$SELF" ` + fsopVerb + ` write .git/worktrees/wt/commondir`, "EACCES"},
		{"rewrite-old-git-file", `"$SELF" ` + fsopVerb + ` write pre/.git`, "EACCES|EROFS"},
		{"rewrite-old-commondir", `"$SELF" ` + fsopVerb + ` write .git/worktrees/pre/commondir`, "EACCES|EROFS"},
		// Only a regular file is git's.
		{"fifo-git", "mkdir f && mkfifo f/.git 2>/dev/null && echo made || echo refused", "refused"},
	}
	var script strings.Builder
	for _, s := range steps {
		script.WriteString("echo " + s.name + "=$( (" + s.script + ") 2>step.err | tr -d '\\n'); cat step.err >&2\n")
	}
	script.WriteString("rm -f step.err\n")
	code, stdout, stderr := e.runCLI(t, []string{"OXSUPERVISE_QUARANTINE_DIR=" + qdir}, script.String())
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(stdout, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	for _, s := range steps {
		if v := got[s.name]; !slices.Contains(strings.Split(s.want, "|"), v) {
			t.Errorf("%s: %q, want %s\nstderr:\n%s", s.name, got[s.name], s.want, stderr)
		}
	}
	id, layers := sessionOf(t, e.auditLog, 0)
	if !strings.Contains(layers, "bpf-lsm") {
		t.Fatalf("session layers %q: not the BPF-LSM path", layers)
	}

	// Normal work stayed where git put it, and works after the session.
	if out := e.git(t, "worktree", "list"); !strings.Contains(out, filepath.Join(e.ws, "wt")) {
		t.Errorf("git worktree list after the session:\n%s", out)
	}
	if out := e.git(t, "-C", "wt", "log", "--oneline"); !strings.Contains(out, "in wt") {
		t.Errorf("the commit in the worktree did not land:\n%s", out)
	}
	if got := read(t, filepath.Join(e.ws, "lib", ".git")); got != "gitdir: ../.git/modules/lib" {
		t.Errorf("lib/.git after the session: %q", got)
	}
	// Refused rewrites changed nothing.
	for path, want := range map[string]string{
		filepath.Join(e.ws, "pre", ".git"):                           preGit,
		filepath.Join(e.ws, "wt", ".git"):                            "gitdir: " + filepath.Join(e.ws, ".git", "worktrees", "wt"),
		filepath.Join(e.ws, ".git", "worktrees", "wt", "commondir"):  "../..",
		filepath.Join(e.ws, ".git", "worktrees", "pre", "commondir"): "../..",
	} {
		if got := read(t, path); got != want {
			t.Errorf("%s after the session: %q, want %q", path, got, want)
		}
	}
	expectDenial(t, e.auditLog, id, "open", filepath.Join(e.ws, "wt", ".git"))
	expectDenial(t, e.auditLog, id, "open", filepath.Join(e.ws, ".git", "worktrees", "wt", "commondir"))
	expectDenial(t, e.auditLog, id, "create", filepath.Join(e.ws, "f", ".git"))

	// What points git elsewhere is in the session's quarantine, audited.
	moved := map[string]string{}
	for _, r := range records(t, e.auditLog) {
		if r.Ox.Session != id || r.Ox.Layer != audit.LayerQuarantine || r.File == nil {
			continue
		}
		_, to, ok := strings.Cut(r.Message, ", moved to ")
		if !ok || r.Ox.Kind != audit.KindDenial || r.Ox.Decision != "quarantine" || r.Ox.Rule == "" {
			t.Errorf("quarantine record %+v", r)
			continue
		}
		moved[r.File.Path] = to
	}
	for _, rel := range []string{"sub/.git", "moved/.git", ".git/worktrees/evil/commondir"} {
		p := filepath.Join(e.ws, rel)
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still in the workspace after the session", rel)
		}
		to, ok := moved[p]
		if !ok {
			t.Errorf("no quarantine record for %s; records %v", rel, moved)
			continue
		}
		if !strings.HasPrefix(to, filepath.Join(qdir, id)+"/") {
			t.Errorf("%s moved to %s, outside the session's quarantine %s", rel, to, filepath.Join(qdir, id))
		}
		if _, err := os.Stat(to); err != nil {
			t.Errorf("%s's quarantined copy: %v", rel, err)
		}
	}
	if len(moved) != 3 {
		t.Errorf("quarantined %v, want exactly the three entries that point elsewhere", moved)
	}
}
