//go:build linux

package session_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A refusal that is the session's last act (a write, and the read of a
// credential) — the command's final process makes it and exits, and the
// supervisor tears the session down at once — is in the audit log, before
// session_stop, when `run` returns: the teardown's drains
// (the BPF ring buffer of the read-only view's tracer, the kernel audit
// feed of Landlock up to the supervisor's own marker) end only once they
// have every refusal, not after a wait for silence. Each way a refusal
// reaches the log is tried in several rounds, since losing it would be a
// race.
func TestRunAuditsARefusalThatIsTheSessionsLastAct(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	kernelAuditUsable(t)
	tests := []struct {
		name string
		// op is the fsop operation, target the path it names.
		op     func(e *env, target string) string
		target func(e *env) string
		errno  unix.Errno
		layer  string
	}{
		{
			// Outside the writable roots the read-only view refuses with
			// EROFS; its tracer reports through the BPF ring buffer.
			name:   "write outside the writable roots",
			target: func(e *env) string { return fmt.Sprintf("/etc/oxs-last-act-%d", time.Now().UnixNano()) },
			op:     func(e *env, target string) string { return "write " + target },
			errno:  unix.EROFS, layer: "read-only-view",
		},
		{
			// A credential under the home is Landlock's refusal (the
			// read-only view lets it be read), reported through the
			// kernel audit feed: no write is Landlock's to refuse there,
			// the read-only view refuses them first.
			name:   "read of a credential",
			target: func(e *env) string { return filepath.Join(e.home, ".ssh", "canary") },
			op:     func(e *env, target string) string { return "read " + target },
			errno:  unix.EACCES, layer: "landlock",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			logPath := filepath.Join(e.base, "audit.jsonl")
			for round := range 5 {
				target := tt.target(e)
				r := e.run(t, nil, "run", "--audit-log", logPath, "--", "sh", "-c",
					`echo "session=$OXSUPERVISE_SESSION"; exec "$FSOP" `+tt.op(e, target))
				id, errname, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(r.stdout), "session="), "\n")
				if r.code != 0 || errname != unix.ErrnoName(tt.errno) {
					t.Fatalf("round %d: exit %d, stdout %q (want the session id, then %s), stderr %q",
						round, r.code, r.stdout, unix.ErrnoName(tt.errno), r.stderr)
				}
				if tt.errno == unix.EROFS && exists(target) {
					t.Fatalf("round %d: %s exists after the refused %s", round, target, tt.name)
				}
				recs := sessionRecords(t, logPath, id)
				refusals := 0
				for _, rec := range recs {
					if rec.Ox.Kind == "denial" && rec.Ox.Layer == tt.layer && rec.Ox.Errno == int(tt.errno) &&
						rec.File != nil && rec.File.Path == target && rec.Process != nil && rec.Process.Name == "fsop" {
						refusals++
					}
				}
				if refusals != 1 {
					t.Fatalf("round %d: %d %s records of fsop's refusal on %s, want 1; the session's records:\n%s",
						round, refusals, tt.layer, target, dumpRecords(recs))
				}
				if last := recs[len(recs)-1]; last.Ox.Kind != "session_stop" {
					t.Fatalf("round %d: the session's last record is %q, want session_stop; records:\n%s", round, last.Ox.Kind, dumpRecords(recs))
				}
			}
		})
	}
}

// sessionRecords returns the records of session id in the audit log at
// path, in order.
func sessionRecords(t *testing.T, path, id string) []logRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var out []logRecord
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec logRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("bad audit line %q: %v", line, err)
		}
		if rec.Ox.Session == id {
			out = append(out, rec)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no record of session %s in %s:\n%s", id, path, b)
	}
	return out
}

func dumpRecords(recs []logRecord) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "  %s %s errno=%d %q\n", r.Ox.Kind, r.Ox.Layer, r.Ox.Errno, r.Message)
	}
	return b.String()
}
