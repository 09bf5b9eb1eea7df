//go:build linux

package session_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunAuditsReadOnlyView: on the Landlock path, every change of a file
// outside the writable roots fails with EROFS in the read-only mount view
// before any LSM is asked; each leaves the file as it was and exactly one
// audit record of layer read-only-view with the operation and the file
// (a relative path completed against the working directory).
func TestRunAuditsReadOnlyView(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	victim := filepath.Join(e.outside, "victim.txt")
	created := filepath.Join(e.outside, "created.txt")
	createdRel := filepath.Join(e.outside, "created-relative.txt")
	renamed := filepath.Join(e.outside, "renamed.txt")
	rel, err := filepath.Rel(e.ws, createdRel)
	if err != nil || !strings.HasPrefix(rel, "../") {
		t.Fatalf("relative path from %s to %s: %q, %v", e.ws, createdRel, rel, err)
	}
	var before unix.Stat_t
	if err := unix.Stat(victim, &before); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cmd, action, path string
	}{
		{"chmod", "chmod " + victim, "chmod", victim},
		{"chown", "chown " + victim, "chown", victim},
		{"utimes", "utimes " + victim, "utimes", victim},
		{"write", "append " + victim, "open", victim},
		{"create", "write " + created, "open", created},
		{"create-relative", "write " + rel, "open", createdRel},
		{"unlink", "unlink " + victim, "unlink", victim},
		{"rename", "rename " + victim + " " + renamed, "rename", victim},
	}
	var ops []op
	for _, tt := range tests {
		ops = append(ops, op{tt.name, tt.cmd, []string{"EROFS"}})
	}
	e.runOps(t, "workspace-write", ops)

	var after unix.Stat_t
	if err := unix.Stat(victim, &after); err != nil {
		t.Fatalf("%s after the session: %v", victim, err)
	}
	if after.Mode != before.Mode || after.Uid != before.Uid || after.Gid != before.Gid || after.Mtim != before.Mtim || after.Size != before.Size {
		t.Errorf("%s changed: mode %o uid %d gid %d mtime %v size %d; was %o %d %d %v %d", victim,
			after.Mode, after.Uid, after.Gid, after.Mtim, after.Size, before.Mode, before.Uid, before.Gid, before.Mtim, before.Size)
	}
	if got := mustRead(t, victim); got != "victim\n" {
		t.Errorf("%s holds %q", victim, got)
	}
	for _, p := range []string{created, createdRel, renamed} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the session (%v)", p, err)
		}
	}

	logPath := filepath.Join(e.base, "audit.jsonl")
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	type key struct{ action, path string }
	seen := map[key]int{}
	total := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec logRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("bad audit line %q: %v", line, err)
		}
		if rec.Ox.Layer != "read-only-view" {
			continue
		}
		total++
		if rec.Ox.Kind != "denial" || rec.Ox.Errno != int(unix.EROFS) || rec.Ox.Mode != "workspace-write" ||
			rec.Ox.Rule != "read-only outside the writable roots" || rec.Process == nil || rec.Process.Name != "fsop" || rec.File == nil {
			t.Errorf("read-only view record: %s", line)
			continue
		}
		seen[key{rec.Event.Action, rec.File.Path}]++
	}
	// Every test's (action, path) pair is distinct.
	for _, tt := range tests {
		if n := seen[key{tt.action, tt.path}]; n != 1 {
			t.Errorf("%s: %d read-only-view records of %s %s, want 1", tt.name, n, tt.action, tt.path)
		}
	}
	if total != len(tests) {
		t.Errorf("%d read-only-view records, want %d; log:\n%s", total, len(tests), b)
	}
}

// TestRunWithoutReadOnlyViewAudit: where the tracer cannot be built (a
// kernel without raw tracepoints; forced here) the session still runs and
// the view still refuses (enforcement is the mount view's), the session is
// told loudly that EROFS refusals are not audited, and none is recorded.
func TestRunWithoutReadOnlyViewAudit(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	victim := filepath.Join(e.outside, "victim.txt")
	r := e.run(t, []string{"OXSUPERVISE_FORCE_UNAVAILABLE=read-only-view-audit"}, "run", "--", "sh", "-c", `"$FSOP" chmod `+victim)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "EROFS" {
		t.Fatalf("exit %d, stdout %q (want EROFS), stderr %q", r.code, r.stdout, r.stderr)
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() == 0o777 {
		t.Errorf("%s after the session: %v, %v", victim, fi, err)
	}
	if !strings.Contains(r.stderr, "EROFS refusals are not audited") {
		t.Errorf("no warning that EROFS refusals are not audited; stderr %q", r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(e.base, "audit.jsonl"))
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	if strings.Contains(string(b), `"layer":"read-only-view"`) {
		t.Errorf("a read-only-view record without the tracer:\n%s", b)
	}
	if !strings.Contains(string(b), `"kind":"session_stop"`) {
		t.Errorf("the session did not end normally; log:\n%s", b)
	}
}
