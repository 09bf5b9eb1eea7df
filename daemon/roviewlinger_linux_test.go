//go:build linux

package daemon

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// TestROViewLingersBetweenSessions: the daemon keeps the read-only view
// audit's program attached for ROViewLinger after a run session ends. A
// user's sessions one after another run with the one link it attached for
// the first, and the refusal each makes as its last act is in the audit
// log, exactly once, when the client returns; the linger's end detaches
// the program, the next session attaches it again, and the daemon's stop
// detaches it while it lingers.
func TestROViewLingersBetweenSessions(t *testing.T) {
	w := newWorld(t)
	if _, ok := landlockUsable(); !ok {
		t.Skip("SKIPPED, NOT PASSED: Landlock unusable: no read-only view")
	}
	clock := &testutil.LingerClock{}
	w.opts.roviewAfterFunc = clock.AfterFunc
	w.start(t)
	roview := w.srv.enf.roview
	if roview == nil {
		t.Skipf("SKIPPED, NOT PASSED: the daemon built no read-only view audit here (BPF-LSM: %v; read-only view audit: %v)", w.srv.enf.fsErr, w.srv.enf.host.ROViewErr())
	}
	var prog ebpf.ProgramID
	for _, p := range roview.Objects().Programs {
		prog = testutil.ProgramID(t, p)
	}
	links := func() []link.ID { return testutil.LinksOf(t, prog) }
	// session runs one session as nobody whose last act is a write
	// outside the workspace, refused by the view, and checks its record.
	n := 0
	session := func() {
		t.Helper()
		n++
		target := filepath.Join(w.outside, fmt.Sprintf("linger-%d", n))
		res := w.runHelper(t, nobody, w.ws, []string{"OUT=" + target}, "run", w.ws, "sh", "-c", `echo x > "$OUT"`)
		if res.code == 0 {
			t.Fatalf("session %d: the write to %s succeeded\nstderr %s", n, target, res.stderr)
		}
		denials := 0
		for _, r := range auditRecords(t, w.audit) {
			if f, _ := r["file"].(map[string]any); oxField(r, "kind") == "denial" && oxField(r, "layer") == "read-only-view" && f["path"] == target {
				denials++
			}
		}
		if denials != 1 {
			t.Fatalf("session %d: %d read-only-view denials of %s in the log when the client returned, want 1\nstderr %s", n, denials, target, res.stderr)
		}
	}
	if ids := links(); len(ids) != 0 {
		t.Fatalf("the program is attached before any session: links %v", ids)
	}
	var first link.ID
	for round := range 2 {
		session()
		ids := links()
		if !roview.Attached() || len(ids) != 1 {
			t.Fatalf("round %d: right after the session: attached %v, the program's links in the kernel %v; want one", round, roview.Attached(), ids)
		}
		if round == 0 {
			first = ids[0]
		} else if ids[0] != first {
			t.Fatalf("the second session ran with link %d, not the lingering %d: the program was attached again", ids[0], first)
		}
		if p := clock.Pending(); len(p) != 1 || p[0].D != ROViewLinger {
			t.Fatalf("round %d: %d lingers pending, want one of %v", round, len(p), ROViewLinger)
		}
	}
	// The slot the daemon makes after the session is forked with a copy
	// of its descriptors, the link's among them: the link's end is
	// checked once that fork is done (slotPool.waitFilled).
	w.srv.slots.waitFilled()
	clock.End(clock.Pending()[0])
	if ids := links(); roview.Attached() || len(ids) != 0 {
		t.Fatalf("after the linger: attached %v, the program's links in the kernel %v; want none", roview.Attached(), ids)
	}
	session()
	if ids := links(); len(ids) != 1 || ids[0] == first {
		t.Fatalf("the session after the linger: the program's links %v, want one new one (the first was %d)", ids, first)
	}
	w.stop()
	if ids := links(); len(ids) != 0 {
		t.Fatalf("the daemon stopped while the program lingered: its links %v are left in the kernel", ids)
	}
	if p := clock.Pending(); len(p) != 0 {
		t.Fatalf("the daemon stopped with %d lingers pending", len(p))
	}
}
