//go:build linux

package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/session"
)

// TestROViewLinger: with a linger, the read-only view's program stays
// attached in the kernel after the last session ends; the next session
// in the linger runs with that same link (no attach) and its refusal,
// its last act, is audited exactly once; the linger's end detaches it,
// the end of a cancelled linger does nothing, and Close detaches a
// lingering program. Without a linger it is detached as the session ends.
func TestROViewLinger(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	cgroup2Mount(t)
	self := selfExe(t)
	const lingerFor = time.Hour // never reached: the test ends lingers
	tests := []struct {
		name   string
		linger time.Duration
		// close closes the layer while the last session's linger is under
		// way instead of ending it.
		close bool
	}{
		{name: "no linger"},
		{name: "linger ended", linger: lingerFor},
		{name: "closed while lingering", linger: lingerFor, close: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &testutil.LingerClock{}
			roview, err := session.NewROViewLayer(session.ROViewConfig{Linger: tt.linger, AfterFunc: clock.AfterFunc})
			if err != nil {
				t.Skipf("SKIPPED, NOT PASSED: no read-only view audit on this kernel (%v)", err)
			}
			closed := false
			defer func() {
				if !closed {
					roview.Close()
				}
			}()
			prog := roviewProgID(t, roview)
			if ids := testutil.LinksOf(t, prog); len(ids) != 0 {
				t.Fatalf("program attached before any session: links %v", ids)
			}
			e := newEnv(t)
			reg := session.Registry{Dir: filepath.Join(e.base, "registry")}
			var linkIDs []link.ID
			for round := range 3 {
				target := filepath.Join(e.outside, fmt.Sprintf("linger-%d", round))
				var info session.SessionInfo
				out, err := os.CreateTemp(e.base, "stdout-")
				if err != nil {
					t.Fatal(err)
				}
				code, runErr := session.Run(context.Background(), session.RunOptions{
					Policy: compiledFor(t, e),
					// The refusal is the session's last act.
					Argv: []string{"sh", "-c", `exec "$FSOP" write ` + target},
					Env:  []string{"PATH=/usr/bin:/bin", "HOME=" + e.home, "FSOP=" + fsop},
					Dir:  e.ws, SelfExe: self, Registry: reg, Stdout: out,
					Layers:  []session.SessionLayer{roview},
					OnStart: func(i session.SessionInfo) { info = i },
				})
				out.Close()
				said, _ := os.ReadFile(out.Name())
				if runErr != nil || code != 0 || strings.TrimSpace(string(said)) != "EROFS" {
					t.Fatalf("round %d: Run: code %d, %v; fsop said %q, want EROFS", round, code, runErr, said)
				}
				// The program reported the refusal: it ran during the session.
				if n := roviewDenials(t, filepath.Join(e.base, "audit.jsonl"), info.ID, target); n != 1 {
					t.Fatalf("round %d: %d read-only-view records of the write to %s, want 1", round, n, target)
				}
				ids := testutil.LinksOf(t, prog)
				if tt.linger == 0 {
					if roview.Attached() || len(clock.All()) != 0 {
						t.Fatalf("round %d: no linger, yet attached %v after the session, lingers %d", round, roview.Attached(), len(clock.All()))
					}
					continue
				}
				if !roview.Attached() || len(ids) != 1 {
					t.Fatalf("round %d: right after the session: attached %v, links of the program in the kernel %v; want one", round, roview.Attached(), ids)
				}
				linkIDs = append(linkIDs, ids[0])
				if linkIDs[0] != ids[0] {
					t.Fatalf("round %d: the session in the linger ran with link %d, not the lingering %d: attached again", round, ids[0], linkIDs[0])
				}
				if p := clock.Pending(); len(p) != 1 || p[0].D != tt.linger || len(clock.All()) != round+1 {
					t.Fatalf("round %d: %d lingers scheduled, %d pending (want %d, one of %v)", round, len(clock.All()), len(p), round+1, tt.linger)
				}
			}
			if tt.linger == 0 {
				return
			}
			// The first round's linger was cancelled by the second session:
			// its end, had its timer fired anyway, leaves the program.
			clock.End(clock.All()[0])
			if !roview.Attached() || len(testutil.LinksOf(t, prog)) != 1 {
				t.Fatal("the end of a cancelled linger detached the program")
			}
			last := clock.Pending()[0]
			if tt.close {
				if err := roview.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				closed = true
				if len(clock.Pending()) != 0 {
					t.Error("Close left the linger's timer running")
				}
			} else {
				clock.End(last)
				if roview.Attached() {
					t.Fatal("attached after its linger ended")
				}
			}
			if ids := testutil.LinksOf(t, prog); len(ids) != 0 {
				t.Fatalf("links of the program left in the kernel: %v", ids)
			}
		})
	}
}

// roviewProgID is the kernel id of the layer's program.
func roviewProgID(t *testing.T, l *session.ROViewLayer) ebpf.ProgramID {
	t.Helper()
	for _, p := range l.Objects().Programs {
		return testutil.ProgramID(t, p)
	}
	t.Fatal("the layer has no program")
	return 0
}

// roviewDenials counts the read-only-view denials of the write to target
// that session id's audit log holds.
func roviewDenials(t *testing.T, logPath, id, target string) int {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec logRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("bad audit line %q: %v", line, err)
		}
		if rec.Ox.Session == id && rec.Ox.Kind == "denial" && rec.Ox.Layer == "read-only-view" &&
			rec.Ox.Errno == int(unix.EROFS) && rec.File != nil && rec.File.Path == target {
			n++
		}
	}
	return n
}
