//go:build linux

package escapetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/internal/shquote"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/session"
)

// Config is how a test runs the table.
type Config struct {
	// CLI is the oxsupervise binary; Self the test binary, which runs Op
	// when started with testutil.OpArgs(OpName).
	CLI, Self string
}

// Run performs every row of the table in one `oxsupervise run` session
// with the default policy and network none, then checks each row (a
// subtest named class/name) on the path the probes say run takes: the
// result of every step, the files afterwards, the audit records and what
// run said about its boundary.
func Run(t *testing.T, cfg Config) {
	testutil.RequireRoot(t)
	k := Probe()
	if k.Path == PathLandlock && k.LandlockABI < 3 {
		testutil.SkipUnlessVM(t, "neither BPF-LSM nor Landlock ABI >= 3 (ABI %d): run refuses filesystem rules here", k.LandlockABI)
	}
	w := newWorld(t)
	k.CloneIntoCgroup = ProbeCloneIntoCgroup(t, cfg.Self, w.Cgroup2, "oxs-escape-clone3-probe-"+filepath.Base(w.Base))
	t.Logf("escape table on the %s path (Landlock ABI %d, seccomp audited %v, clone3 into the cgroup2 root outside a session: %s)",
		k.Path, k.LandlockABI, k.SeccompAudited, k.CloneIntoCgroup)
	rows := Rows(w)

	var script strings.Builder
	for _, r := range rows {
		for i, step := range r.Steps {
			fmt.Fprintf(&script, "printf '%%s=' %s; %s\n", shquote.Quote(stepKey(r, i)), step)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cfg.CLI, "run", "--workspace", w.WS, "--audit-log", w.AuditLog, "--net", "none", "--", "sh", "-c", script.String())
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = w.WS
	cmd.Env = append(os.Environ(), "HOME="+w.Home, "SELF="+cfg.Self, "GIT_CONFIG_NOSYSTEM=1",
		"OXSUPERVISE_QUARANTINE_DIR="+w.Quarantine)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(w.AuditLog)
		t.Fatalf("oxsupervise run: %v\nstdout:\n%s\nstderr:\n%s\naudit log:\n%s", err, stdout.String(), stderr.String(), log)
	}
	got := map[string]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	records := testutil.AuditRecords(t, w.AuditLog)
	s := Session{Stderr: stderr.String()}
	for _, r := range records {
		if r.Ox.Kind == audit.KindSessionStart {
			s.ID, s.Layers = r.Ox.Session, r.Ox.Rule
			break
		}
	}
	if s.ID == "" {
		t.Fatalf("no session_start in the audit log")
	}
	// The probes and run must agree on the path, or every row's
	// expectation is the wrong one.
	if hasBPF := strings.Contains(s.Layers, session.LayerBPFLSM); hasBPF != (k.Path == PathBPFLSM) {
		t.Fatalf("the probe says the %s path, the session's layers are %q", k.Path, s.Layers)
	}
	t.Logf("session %s, layers %s; run said:\n%s", s.ID, s.Layers, s.Stderr)

	used := map[int]bool{}
	for _, r := range rows {
		t.Run(r.Class+"/"+r.Name, func(t *testing.T) {
			want := r.Want(k, s, w)
			if want.Skip != "" {
				t.Skipf("SKIPPED, NOT PASSED: %s", want.Skip)
			}
			if len(want.Results) != len(r.Steps) {
				t.Fatalf("table error: %d expected results for %d steps", len(want.Results), len(r.Steps))
			}
			for i, step := range r.Steps {
				g, ok := got[stepKey(r, i)]
				t.Logf("step %d: %s", i, g)
				switch {
				case !ok:
					t.Errorf("step %d (%s): no result; stdout:\n%s", i, step, stdout.String())
				case !slices.Contains(want.Results[i], g):
					t.Errorf("step %d (%s): %s, want %s", i, step, g, strings.Join(want.Results[i], " or "))
				}
			}
			if want.State != nil {
				if err := want.State(w); err != nil {
					t.Error(err)
				}
			}
			for _, a := range want.Audit {
				if err := findRecord(records, used, s.ID, a, w); err != nil {
					t.Errorf("audit: %v", err)
				}
			}
			for _, u := range want.Unaudited {
				if u.Why == "" {
					t.Fatalf("table error: no reason why %s is not audited", u.Record)
				}
				if err := noRecord(records, u.Record, w); err != nil {
					t.Errorf("audit: %v; none expected: %s", err, u.Why)
				} else {
					t.Logf("no %s record, as expected: %s", u.Record, u.Why)
				}
			}
			for _, said := range want.Said {
				if !strings.Contains(s.Stderr, said) {
					t.Errorf("run does not say %q, which this row's expectation rests on", said)
				}
			}
			for _, unsaid := range want.Unsaid {
				if strings.Contains(s.Stderr, unsaid) {
					t.Errorf("run says %q, which this path's result contradicts", unsaid)
				}
			}
		})
	}
}

func stepKey(r Row, i int) string { return fmt.Sprintf("%s/%s/%d", r.Class, r.Name, i) }

// findRecord finds a denial of session matching want that no other row
// claimed, and claims it. A quarantine record must name where the entry
// went, inside the session's quarantine, and the entry must be there.
func findRecord(records []audit.Record, used map[int]bool, id string, want Record, w *World) error {
	var seen []string
	for i, r := range records {
		if r.Ox.Kind != audit.KindDenial || r.Ox.Layer != want.Layer {
			continue
		}
		path := ""
		if r.File != nil {
			path = r.File.Path
		}
		seen = append(seen, fmt.Sprintf("%s %s %s errno %d %s", r.Ox.Layer, r.Event.Action, r.Ox.Class, r.Ox.Errno, path))
		if used[i] || r.Ox.Session != id || !recordMatches(r, want) {
			continue
		}
		if want.Layer == audit.LayerQuarantine {
			_, to, ok := strings.Cut(r.Message, ", moved to ")
			if !ok || !strings.HasPrefix(to, filepath.Join(w.Quarantine, id)+"/") {
				return fmt.Errorf("quarantine record of %s: %q does not name a place in the session's quarantine %s", path, r.Message, filepath.Join(w.Quarantine, id))
			}
			if _, err := os.Lstat(to); err != nil {
				return fmt.Errorf("quarantine record of %s: %s is not there: %v", path, to, err)
			}
		}
		used[i] = true
		return nil
	}
	return fmt.Errorf("no record %s in session %s; %s records: %q", want, id, want.Layer, seen)
}

// noRecord fails when the log has a denial matching want, of any session
// (the log is this session's alone) and whether or not a row claimed it.
func noRecord(records []audit.Record, want Record, w *World) error {
	for _, r := range records {
		if r.Ox.Kind == audit.KindDenial && r.Ox.Layer == want.Layer && recordMatches(r, want) {
			pid := 0
			if r.Process != nil {
				pid = r.Process.PID
			}
			return fmt.Errorf("record %s in %s: %s (session %s, pid %d)", want, w.AuditLog, r.Ox.Rule, r.Ox.Session, pid)
		}
	}
	return nil
}

// recordMatches compares the fields want sets (Layer is the caller's).
func recordMatches(r audit.Record, want Record) bool {
	path := ""
	if r.File != nil {
		path = r.File.Path
	}
	return (want.Action == "" || r.Event.Action == want.Action) &&
		(want.Class == "" || r.Ox.Class == want.Class) &&
		(want.Errno == 0 || r.Ox.Errno == int(want.Errno)) &&
		pathMatches(want, path)
}

func pathMatches(want Record, path string) bool {
	if want.Path == "" || path == want.Path {
		return true
	}
	return want.Related && (strings.HasPrefix(want.Path, path+"/") || strings.HasPrefix(path, want.Path+"/"))
}
