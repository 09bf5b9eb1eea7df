//go:build linux

package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/session"
)

// RunOptions.Settled is called once, before Run returns and with what it
// returns, when the session has settled: at that moment (Run has not
// released anything yet) the audit log already holds the refusal that was
// the session's last act and session_stop as the session's last record,
// and neither the session's group nor its registry entry is left. This is
// what the daemon tells its client at; the refusal reaches the log each
// way it can (the BPF ring buffer of the read-only view's tracer, the
// kernel audit feed of Landlock), in several rounds.
func TestRunSettledHoldsTheLastAct(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	kernelAuditUsable(t)
	cgroup2Mount(t)
	self := selfExe(t)
	roview, err := session.NewROViewLayer(session.ROViewConfig{})
	if err != nil {
		t.Skipf("SKIPPED, NOT PASSED: no read-only view audit on this kernel (%v): its refusals cannot reach the log", err)
	}
	defer roview.Close()
	tests := []struct {
		name   string
		target func(e *env) string
		op     string // fsop's operation on the target
		errno  unix.Errno
		layer  string
	}{
		{
			name:   "write outside the writable roots",
			target: func(e *env) string { return fmt.Sprintf("/etc/oxs-settled-%d", time.Now().UnixNano()) },
			op:     "write", errno: unix.EROFS, layer: "read-only-view",
		},
		{
			name:   "read of a credential",
			target: func(e *env) string { return filepath.Join(e.home, ".ssh", "canary") },
			op:     "read", errno: unix.EACCES, layer: "landlock",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			reg := session.Registry{Dir: filepath.Join(e.base, "registry")}
			logPath := filepath.Join(e.base, "audit.jsonl")
			for round := range 5 {
				target := tt.target(e)
				var calls int
				var settledCode int
				var settledErr, check error
				var stdout strings.Builder
				out, err := os.CreateTemp(e.base, "stdout-")
				if err != nil {
					t.Fatal(err)
				}
				var info session.SessionInfo
				code, runErr := session.Run(context.Background(), session.RunOptions{
					Policy: compiledFor(t, e),
					Argv:   []string{"sh", "-c", `exec "$FSOP" ` + tt.op + " " + target},
					Env:    []string{"PATH=/usr/bin:/bin", "HOME=" + e.home, "FSOP=" + fsop},
					Dir:    e.ws, SelfExe: self, Registry: reg, Stdout: out,
					Layers:  []session.SessionLayer{roview},
					OnStart: func(i session.SessionInfo) { info = i },
					Settled: func(code int, err error) {
						calls++
						settledCode, settledErr = code, err
						check = settledState(logPath, reg, info, target, tt.layer, tt.errno)
					},
				})
				out.Close()
				b, _ := os.ReadFile(out.Name())
				stdout.Write(b)
				if runErr != nil || code != 0 || strings.TrimSpace(stdout.String()) != unix.ErrnoName(tt.errno) {
					t.Fatalf("round %d: Run: code %d, %v; fsop said %q, want %s", round, code, runErr, stdout.String(), unix.ErrnoName(tt.errno))
				}
				if calls != 1 || settledCode != code || settledErr != nil {
					t.Fatalf("round %d: Settled called %d times with (%d, %v); Run returned (%d, %v)", round, calls, settledCode, settledErr, code, runErr)
				}
				if check != nil {
					t.Fatalf("round %d: when Settled was called: %v", round, check)
				}
			}
		})
	}
}

// settledState checks, for the Settled callback of session s, that the
// log at logPath holds one denial of target by layer with errno and ends
// the session with session_stop, and that the session's registry entry
// and group are gone.
func settledState(logPath string, reg session.Registry, s session.SessionInfo, target, layer string, errno unix.Errno) error {
	id := s.ID
	if id == "" {
		return errors.New("OnStart was not called before Settled")
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		return err
	}
	var kinds []string
	refusals, last := 0, ""
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec logRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return fmt.Errorf("bad audit line %q: %w", line, err)
		}
		if rec.Ox.Session != id {
			continue
		}
		kinds = append(kinds, rec.Ox.Kind+"/"+rec.Ox.Layer)
		last = rec.Ox.Kind
		if rec.Ox.Kind == "denial" && rec.Ox.Layer == layer && rec.Ox.Errno == int(errno) && rec.File != nil && rec.File.Path == target {
			refusals++
		}
	}
	if refusals != 1 || last != "session_stop" {
		return fmt.Errorf("%d %s records of the refusal on %s (want 1), last record %q (want session_stop); the session's records: %v", refusals, layer, target, last, kinds)
	}
	if e, err := reg.Get(id); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("registry entry of %s still there: %+v, %v", id, e, err)
	}
	if _, err := os.Stat(s.CgroupPath); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("group %s of %s still there (%v)", s.CgroupPath, id, err)
	}
	return nil
}
