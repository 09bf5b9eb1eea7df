//go:build linux

package daemon

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/internal/phasetime"
)

// With DebugTiming the daemon logs each phase of a run session's start and
// end as a debug record (what OXSUPERVISE_DEBUG_TIMING prints for a
// standalone run); without it, none.
func TestDebugTimingLogsRunPhases(t *testing.T) {
	for _, tt := range []struct {
		name string
		on   bool
	}{{"on", true}, {"off", false}} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			w.opts.DebugTiming = tt.on
			w.start(t)
			if res := w.runHelper(t, nobody, w.ws, nil, "run", w.ws, "true"); res.code != 0 {
				t.Fatalf("run: exit %d: %s", res.code, res.stderr)
			}
			// The client may exit at the exit event, before the daemon
			// logs that it sent it ("exit sent"): the log is read once
			// the daemon has stopped, its handlers returned.
			w.stop()
			phases := map[string]bool{}
			sc := bufio.NewScanner(strings.NewReader(w.log.String()))
			for sc.Scan() {
				var rec struct{ Level, Message string }
				if json.Unmarshal(sc.Bytes(), &rec) != nil {
					t.Fatalf("daemon log line is not JSON: %q", sc.Text())
				}
				if rest, ok := strings.CutPrefix(rec.Message, "oxsupervise: timing: "); ok {
					if rec.Level != "debug" {
						t.Fatalf("timing record at level %q, want debug: %q", rec.Level, sc.Text())
					}
					phases[strings.TrimSpace(rest[:strings.Index(rest, "  ")])] = true
				}
			}
			want := []string{"request received", "policy", "launcher started", "command executed", "command exited", "final check of names", "exit sent"}
			for _, p := range want {
				if phases[p] != tt.on {
					t.Errorf("phase %q logged = %v, want %v; logged: %v", p, phases[p], tt.on, phases)
				}
			}
		})
	}
}

// A client started with OXSUPERVISE_DEBUG_TIMING gets the daemon's phases
// of its run as timing events, printed between its own; the daemon's log
// stays without them (its DebugTiming is off), and a client without it
// gets none.
func TestRunTimingEventsToTheClient(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	for _, tt := range []struct {
		name string
		env  []string
		want bool
	}{{"asked", []string{phasetime.Env + "=1"}, true}, {"not asked", nil, false}} {
		t.Run(tt.name, func(t *testing.T) {
			res := w.runHelper(t, nobody, w.ws, tt.env, "run", w.ws, "true")
			if res.code != 0 {
				t.Fatalf("run: exit %d: %s", res.code, res.stderr)
			}
			for _, phase := range []string{"request received", "command exited", "audit closed", "client: started event", "client: final event"} {
				if got := strings.Contains(res.stderr, "oxsupervise: timing: "+phase+" "); got != tt.want {
					t.Errorf("phase %q on the client's stderr = %v, want %v:\n%s", phase, got, tt.want, res.stderr)
				}
			}
		})
	}
	if strings.Contains(w.log.String(), "timing: ") {
		t.Errorf("the daemon logged timing records without DebugTiming:\n%s", w.log.String())
	}
}
