//go:build linux

package daemon

import (
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// Two sessions run by the daemon at once share its one kernel audit
// reader (Server.kaudit): one refuses a credential read many times, the
// other once as its last act, on the same file. Each client, told its
// session ended, finds in the log exactly its own session's refusals (a
// refusal handed to the wrong session, or lost, changes a count), then
// session_stop last.
func TestRunTwoSessionsAtOnceEachFindsExactlyItsRefusals(t *testing.T) {
	w := newWorld(t)
	if abi, ok := landlockUsable(); !ok {
		t.Skipf("SKIPPED, NOT PASSED: Landlock ABI %d unusable: no refusal of a session to find", abi)
	}
	if why, ok := testutil.LandlockAudited(); !ok && !testutil.IndependentLSMProbe(t).Usable() {
		t.Skipf("SKIPPED, NOT PASSED: %s", why)
	}
	deniedPolicy(t, w, "") // outside/secret is deny_read
	w.start(t)
	secret := filepath.Join(w.outside, "secret", "key.txt")
	// The count of refusals each session makes: its reads before the
	// last, then the last act (exec: nothing of the session runs after).
	counts := []int{40, 0}
	for round := range 3 {
		results := make([]helperResult, len(counts))
		var wg sync.WaitGroup
		for i, before := range counts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = w.runHelper(t, nobody, w.ws, []string{"TARGET=" + secret, "N=" + strconv.Itoa(before)}, "run", w.ws,
					"sh", "-c", `echo "session=$OXSUPERVISE_SESSION"; i=0; while [ $i -lt $N ]; do cat "$TARGET" 2>/dev/null; i=$((i+1)); done; exec cat "$TARGET"`)
			}()
		}
		wg.Wait()
		recs := readRecords(t, w.audit)
		for i, res := range results {
			id := strings.TrimPrefix(strings.TrimSpace(res.stdout), "session=")
			if res.code != 1 || !strings.HasPrefix(id, "s-") || !strings.Contains(res.stderr, "Permission denied") {
				t.Fatalf("round %d: session %d: exit %d (want 1: the refused read), stdout %q, stderr %q", round, i, res.code, res.stdout, res.stderr)
			}
			var own []audit.Record
			denials, lost := 0, uint64(0)
			for _, r := range recs {
				if r.Ox.Session != id {
					continue
				}
				own = append(own, r)
				switch {
				case r.Ox.Kind == audit.KindDenial && r.File != nil && r.File.Path == secret && r.Ox.Errno == int(unix.EACCES):
					denials++
				case r.Ox.Kind == audit.KindEventsLost:
					lost += r.Ox.EventsLost
				}
			}
			want := counts[i] + 1
			if len(own) == 0 || own[len(own)-1].Ox.Kind != audit.KindSessionStop {
				t.Fatalf("round %d: session %s: session_stop is not its last record:\n%s", round, id, recordKinds(own))
			}
			if denials > want || uint64(denials)+lost < uint64(want) || (lost == 0 && denials != want) {
				t.Fatalf("round %d: session %s: %d denial records and %d events_lost for its %d refusals; its records:\n%s",
					round, id, denials, lost, want, recordKinds(own))
			}
		}
	}
}
