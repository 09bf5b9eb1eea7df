//go:build linux

package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// A client told that its session ended (the daemon's final event, sent
// once the session has settled: session.RunOptions.Settled) finds in the
// audit log the refusal that was the session's last act, and session_stop
// as the session's last record; and the daemon's sessions API no longer
// lists the session, not even as an empty group. The session is released
// in the daemon after the client was told; nothing of what the client
// reads waits for that. Each way a refusal reaches the log is tried in
// several rounds, since losing one would be a race.
func TestRunClientToldTheSessionEndedFindsItsLastAct(t *testing.T) {
	w := newWorld(t)
	if abi, ok := landlockUsable(); !ok {
		t.Skipf("SKIPPED, NOT PASSED: Landlock ABI %d unusable: no refusal of a session to find", abi)
	}
	deniedPolicy(t, w, "") // outside/secret is deny_read
	w.start(t)
	secret := filepath.Join(w.outside, "secret", "key.txt")
	tests := []struct {
		name string
		// target is the file refused in round, script the command's last
		// act on $TARGET (exec: nothing of the session runs after it).
		target func(round int) string
		script string
		// skip says why the refusal cannot be audited here, "" when it is.
		skip func(t *testing.T) string
	}{
		{
			// BPF-LSM's refusal, or on the Landlock path the read-only
			// view's (EROFS), reported through the BPF ring buffer.
			name:   "write outside the writable roots",
			target: func(round int) string { return filepath.Join(w.outside, fmt.Sprintf("last-act-%d", round)) },
			script: `exec tee "$TARGET" </dev/null`,
			skip:   func(*testing.T) string { return "" },
		},
		{
			// BPF-LSM's refusal, or Landlock's, reported through the
			// kernel audit feed.
			name:   "read of a deny_read file",
			target: func(int) string { return secret },
			script: `exec cat "$TARGET"`,
			skip: func(t *testing.T) string {
				why, ok := testutil.LandlockAudited()
				if ok || testutil.IndependentLSMProbe(t).Usable() {
					return ""
				}
				return why
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if why := tt.skip(t); why != "" {
				t.Skipf("SKIPPED, NOT PASSED: %s", why)
			}
			for round := range 5 {
				target := tt.target(round)
				res := w.runHelper(t, nobody, w.ws, []string{"TARGET=" + target}, "run", w.ws,
					"sh", "-c", `echo "session=$OXSUPERVISE_SESSION"; `+tt.script)
				id := strings.TrimPrefix(strings.TrimSpace(res.stdout), "session=")
				refused := strings.Contains(res.stderr, "Permission denied") || strings.Contains(res.stderr, "Read-only file system")
				if res.code != 1 || !strings.HasPrefix(id, "s-") || !refused {
					t.Fatalf("round %d: exit %d (want 1: the refused %s), stdout %q, stderr %q", round, res.code, tt.name, res.stdout, res.stderr)
				}
				if tt.name == "write outside the writable roots" && exists(target) {
					t.Fatalf("round %d: %s exists after the refused write", round, target)
				}
				var recs []audit.Record
				for _, r := range readRecords(t, w.audit) {
					if r.Ox.Session == id {
						recs = append(recs, r)
					}
				}
				denials := 0
				for _, r := range recs {
					if r.Ox.Kind == audit.KindDenial && r.File != nil && r.File.Path == target &&
						(r.Ox.Errno == int(unix.EACCES) || r.Ox.Errno == int(unix.EROFS)) {
						denials++
					}
				}
				if denials != 1 || recs[len(recs)-1].Ox.Kind != audit.KindSessionStop {
					t.Fatalf("round %d: %d denial records of %s (want 1), then session_stop last; session %s's records:\n%s",
						round, denials, target, id, recordKinds(recs))
				}
				// The daemon's own view, as an admin sees it: neither a
				// registry entry nor a group of the session is left.
				list, err := (&Client{Socket: w.socket}).Sessions(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, st := range list {
					if st.ID == id {
						t.Fatalf("round %d: the sessions API still lists the ended session %s (state %q)", round, id, st.State)
					}
				}
			}
		})
	}
}

func recordKinds(recs []audit.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "  %s %s errno=%d %q\n", r.Ox.Kind, r.Ox.Layer, r.Ox.Errno, r.Message)
	}
	return b.String()
}
