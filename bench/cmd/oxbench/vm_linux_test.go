//go:build linux

package main

import (
	"strings"
	"testing"
)

// The VM console interleaves kernel and test output with the benchmark's
// marker lines; each figure is assembled from its own lines and counts as
// finished only with its done line.
func TestParseVMOutput(t *testing.T) {
	console := strings.Join([]string{
		"[   12.3] random kernel line",
		`OXBENCH-FSVM header {"variants":["no session","BPF-LSM, 1 anchor"],"metrics":["stat"],"rounds":2,"n":10,"hooks":23}`,
		`noise OXBENCH-FSVM sample {"round":0,"variant":"no session","values":{"stat":100}}` + "\r",
		`OXBENCH-FSVM sample {"round":0,"variant":"BPF-LSM, 1 anchor","values":{"stat":150,"unknown":1}}`,
		`OXBENCH-FSVM failed {"variant":"Landlock only","reason":"no ABI"}`,
		"OXBENCH-FSVM done",
		`OXBENCH-FSVM header {"figure":"fs-vm-macro","variants":["no session","BPF-LSM session (2 anchors)"],"metrics":["git status"],"rounds":1,"n":20000,"hooks":23}`,
		`OXBENCH-FSVM sample {"figure":"fs-vm-macro","round":0,"variant":"no session","values":{"git status":5}}`,
		`OXBENCH-FSVM table {"figure":"fs-vm-mapmem","headers":["map","memlock"]}`,
		`OXBENCH-FSVM row {"figure":"fs-vm-mapmem","cells":["fs_anchors","4096"]}`,
		`OXBENCH-FSVM summary {"figure":"fs-vm-mapmem","memlock0":1000,"memlock1":1000,"memlock100":1000,"entries_per_session":9,"payload_per_session":300,"anchors":1,"patterns":6}`,
		"OXBENCH-FSVM done fs-vm-mapmem",
	}, "\n")
	reps, done, err := parseVMOutput([]byte(console), "cmd")
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*report{}
	for _, r := range reps {
		byID[r.ID] = r
	}
	tests := []struct {
		id       string
		done     bool
		samples  map[string]map[string]int // metric -> variant -> count
		failed   string
		rows     int
		noteHave string
	}{
		{id: vmMicroFigure, done: true, samples: map[string]map[string]int{"stat": {"no session": 1, "BPF-LSM, 1 anchor": 1}}, failed: "Landlock only", noteHave: "23 BPF-LSM hooks"},
		{id: vmMacroFigure, done: false, samples: map[string]map[string]int{"git status": {"no session": 1}}, noteHave: "20000 files"},
		{id: vmMapMemFigure, done: true, rows: 1, noteHave: "Per session: 0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			r := byID[tt.id]
			if r == nil {
				t.Fatalf("no report %s among %d", tt.id, len(reps))
			}
			if done[tt.id] != tt.done {
				t.Errorf("done = %v, want %v", done[tt.id], tt.done)
			}
			for m, vs := range tt.samples {
				for v, n := range vs {
					if got := len(r.Samples[m][v]); got != n {
						t.Errorf("samples[%s][%s] = %d, want %d", m, v, got, n)
					}
				}
			}
			if _, ok := r.Samples["unknown"]; ok {
				t.Error("a metric missing from the header was kept")
			}
			if tt.failed != "" && r.Failed[tt.failed] == "" {
				t.Errorf("failure of %q not recorded: %v", tt.failed, r.Failed)
			}
			if len(r.Rows) != tt.rows {
				t.Errorf("rows = %d, want %d", len(r.Rows), tt.rows)
			}
			if !strings.Contains(strings.Join(r.Notes, "\n"), tt.noteHave) {
				t.Errorf("notes lack %q: %q", tt.noteHave, r.Notes)
			}
		})
	}
}
