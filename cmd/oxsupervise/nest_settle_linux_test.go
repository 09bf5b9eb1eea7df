//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// TestNestedRunToldTheSessionEndedFindsItsLastAct: a nested run is
// answered that its session ended once the outer supervisor has settled
// the child (host's nestServer: Settle, answer, Release). A copy of the
// audit log taken inside the parent session right after the nested run
// returned holds the refusal that was the child's last act and the
// child's session_stop as its last record, in every round and each way
// the refusal reaches the log: the read-only view's tracer (the BPF ring
// buffer) for a write outside the writable roots, Landlock (the kernel
// audit feed) for a write the read-only child may not make to a file of
// the workspace.
func TestNestedRunToldTheSessionEndedFindsItsLastAct(t *testing.T) {
	w := newNestWorld(t)
	const rounds = 5
	tests := []struct {
		name   string
		target func(round int) string
		// existing: the targets exist (and must stay as they are).
		existing bool
		errno    syscall.Errno
		skip     func() string
	}{
		{
			name:   "write outside the writable roots",
			target: func(round int) string { return fmt.Sprintf("/etc/oxs-nested-last-act-%d-%d", os.Getpid(), round) },
			errno:  syscall.EROFS,
			skip:   func() string { return "" },
		},
		{
			name:     "write the read-only child may not make",
			target:   func(round int) string { return filepath.Join(w.ws, fmt.Sprintf("child-%d", round)) },
			existing: true,
			errno:    syscall.EACCES,
			skip: func() string {
				why, _ := testutil.LandlockAudited()
				return why
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if why := tt.skip(); why != "" {
				t.Skipf("SKIPPED, NOT PASSED: %s", why)
			}
			var script strings.Builder
			for round := range rounds {
				if tt.existing {
					if err := os.WriteFile(tt.target(round), []byte("old\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				child := w.oxs("run", "--sandbox", "read-only", "--", "sh", "-c",
					`echo "child=$OXSUPERVISE_SESSION"; exec tee `+shellJoin([]string{tt.target(round)})+` </dev/null`)
				fmt.Fprintf(&script, "printf 'round=%d '; %s; echo \"nested-exit=$?\"; cat %s > %s\n",
					round, shellJoin(child), shellJoin([]string{w.auditLog}), shellJoin([]string{logAtRound(w, round)}))
			}
			r := w.run(t, w.parent(nil, "sh", "-c", script.String()))
			if r.code != 0 {
				t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
			}
			found := regexp.MustCompile(`round=(\d+) child=(s-[0-9a-f]+)\nnested-exit=(\d+)`).FindAllStringSubmatch(r.stdout, -1)
			if len(found) != rounds {
				t.Fatalf("stdout %q: want %d rounds of a child id and its nested run's exit status", r.stdout, rounds)
			}
			for i, m := range found {
				id, target := m[2], tt.target(i)
				if m[1] != fmt.Sprint(i) || m[3] != "1" {
					t.Fatalf("round %d: %q: want the round and exit 1 (tee refused)", i, m[0])
				}
				if b, err := os.ReadFile(target); tt.existing && string(b) != "old\n" || !tt.existing && err == nil {
					t.Fatalf("round %d: %s after the refused write: %q, %v", i, target, b, err)
				}
				var recs []audit.Record
				for _, rec := range testutil.AuditRecords(t, logAtRound(w, i)) {
					if rec.Ox.Session == id {
						recs = append(recs, rec)
					}
				}
				denials := 0
				for _, rec := range recs {
					if rec.Ox.Kind == audit.KindDenial && rec.Ox.Errno == int(tt.errno) && rec.File != nil && rec.File.Path == target {
						denials++
					}
				}
				if denials != 1 || len(recs) == 0 || recs[len(recs)-1].Ox.Kind != audit.KindSessionStop {
					var kinds []string
					for _, rec := range recs {
						kinds = append(kinds, fmt.Sprintf("%s/%s", rec.Ox.Kind, rec.Ox.Layer))
					}
					t.Fatalf("round %d: the log as the nested run returned holds %d denials of %s (want 1) and child %s's records %v (want session_stop last)",
						i, denials, target, id, kinds)
				}
			}
		})
	}
}

// logAtRound is where the parent session copies the audit log after the
// nested run of round returned.
func logAtRound(w *nestWorld, round int) string {
	return filepath.Join(w.ws, fmt.Sprintf("log-at-round-%d", round))
}
