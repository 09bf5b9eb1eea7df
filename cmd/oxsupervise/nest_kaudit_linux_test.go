//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// TestNestedSessionsAtOnceEachFindExactlyTheirRefusals: two nested
// sessions of one parent run at once on the outer supervisor's one kernel
// audit reader (host.RunNesting's kernelaudit.Hub), each refusing writes
// to a file of the workspace (Landlock, the kernel audit feed): one many
// times, one once as its last act. The log holds exactly each child's own
// refusals (one handed to the other child, to the parent, or lost would
// change a count) with the child's session_stop last, and none of them
// as the parent's.
func TestNestedSessionsAtOnceEachFindExactlyTheirRefusals(t *testing.T) {
	w := newNestWorld(t)
	if why, ok := testutil.LandlockAudited(); !ok {
		t.Skipf("SKIPPED, NOT PASSED: %s", why)
	}
	children := []struct {
		name   string
		before int // refused writes before the last act
	}{{"many", 30}, {"one", 0}}
	script := `echo "parent=$OXSUPERVISE_SESSION"; `
	for _, c := range children {
		target := filepath.Join(w.ws, c.name)
		if err := os.WriteFile(target, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		child := w.oxs("run", "--sandbox", "read-only", "--", "sh", "-c",
			fmt.Sprintf(`echo "child=$OXSUPERVISE_SESSION"; i=0; while [ $i -lt %d ]; do echo x 2>/dev/null >%s; i=$((i+1)); done; exec tee %s </dev/null`,
				c.before, shellJoin([]string{target}), shellJoin([]string{target})))
		script += fmt.Sprintf("{ %s; echo \"exit=$?\"; } >%s 2>/dev/null & ", shellJoin(child), shellJoin([]string{filepath.Join(w.ws, c.name+".out")}))
	}
	script += "wait"
	r := w.run(t, w.parent(nil, "sh", "-c", script))
	if r.code != 0 {
		t.Fatalf("exit %d (stdout %q, stderr %q)", r.code, r.stdout, r.stderr)
	}
	parent := regexp.MustCompile(`parent=(s-[0-9a-f]+)`).FindStringSubmatch(r.stdout)
	if parent == nil {
		t.Fatalf("stdout %q: no parent session id", r.stdout)
	}
	recs := w.records(t)
	for _, c := range children {
		target := filepath.Join(w.ws, c.name)
		out, err := os.ReadFile(filepath.Join(w.ws, c.name+".out"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`child=(s-[0-9a-f]+)\nexit=(\d+)`).FindSubmatch(out)
		if m == nil || string(m[2]) != "1" {
			t.Fatalf("child %s: output %q: want its session id and exit 1 (tee refused)", c.name, out)
		}
		if b, _ := os.ReadFile(target); string(b) != "old\n" {
			t.Fatalf("child %s: %s after the refused writes: %q", c.name, target, b)
		}
		id := string(m[1])
		var own []audit.Record
		denials, lost, parentDenials := 0, uint64(0), 0
		for _, rec := range recs {
			refusal := rec.Ox.Kind == audit.KindDenial && rec.File != nil && rec.File.Path == target
			switch {
			case rec.Ox.Session == parent[1] && refusal:
				parentDenials++
			case rec.Ox.Session != id:
			case refusal && rec.Ox.Errno == int(syscall.EACCES):
				own = append(own, rec)
				denials++
			default:
				own = append(own, rec)
				if rec.Ox.Kind == audit.KindEventsLost {
					lost += rec.Ox.EventsLost
				}
			}
		}
		want := c.before + 1
		kinds := func() []string {
			var k []string
			for _, rec := range own {
				k = append(k, fmt.Sprintf("%s/%s", rec.Ox.Kind, rec.Ox.Layer))
			}
			return k
		}
		if len(own) == 0 || own[len(own)-1].Ox.Kind != audit.KindSessionStop {
			t.Fatalf("child %s (%s): records %v, want session_stop last", c.name, id, kinds())
		}
		if denials > want || uint64(denials)+lost < uint64(want) || (lost == 0 && denials != want) {
			t.Fatalf("child %s (%s): %d denial records of %s and %d events_lost for its %d refusals; records %v",
				c.name, id, denials, target, lost, want, kinds())
		}
		if parentDenials != 0 {
			t.Fatalf("child %s: %d of its refusals are in the log as the parent's (%s)", c.name, parentDenials, parent[1])
		}
	}
}
