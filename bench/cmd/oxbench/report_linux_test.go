//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A run of some suites must keep every other figure in the index, marked
// as coming from the earlier run, in suite order.
func TestWriteIndexKeepsFiguresOfSuitesNotRun(t *testing.T) {
	dir := t.TempDir()
	table := func(id, value string) *report {
		return &report{ID: id, Title: "title of " + id, Command: "cmd " + id, Rounds: 1,
			Headers: []string{"what", "value"}, Rows: [][]string{{"x", value}}}
	}
	old := map[string]string{"fs-micro": "old-fs", "memory": "old-memory", "zz-unknown": "old-zz"}
	for id, v := range old {
		if err := table(id, v).write(dir); err != nil {
			t.Fatal(err)
		}
	}
	stamp := time.Date(2026, 11, 30, 4, 20, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "fs-micro.json"), stamp, stamp); err != nil {
		t.Fatal(err)
	}
	fresh := []*report{table("session-start", "new-session"), table("memory", "new-memory")}
	for _, r := range fresh {
		r.RunAt = "2026-11-30T05:00:00Z"
	}
	if err := writeIndex(dir, fresh, time.Minute); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	idx := string(raw)

	tests := []struct {
		name, want string
		present    bool
	}{
		{"fresh figure", "new-session", true},
		{"fresh figure replaces its old file", "new-memory", true},
		{"old numbers of a re-run figure", "old-memory", false},
		{"figure of a suite not run", "old-fs", true},
		{"unknown figure kept", "old-zz", true},
		{"earlier run marked with its file time", "*Earlier run: measured at 2026-11-30T04:20:00Z, not in the last run.*", true},
		{"header names what ran", "measured `session-start`, `memory`", true},
	}
	for _, tt := range tests {
		if got := strings.Contains(idx, tt.want); got != tt.present {
			t.Errorf("%s: results.md contains %q = %v, want %v\n%s", tt.name, tt.want, got, tt.present, idx)
		}
	}
	order := []string{"## title of session-start", "## title of fs-micro", "## title of memory", "## title of zz-unknown"}
	last := -1
	for _, h := range order {
		i := strings.Index(idx, h)
		if i < 0 || i < last {
			t.Fatalf("heading %q missing or out of suite order (at %d, previous at %d)\n%s", h, i, last, idx)
		}
		last = i
	}
	if n := strings.Count(idx, "*Earlier run:"); n != 2 {
		t.Errorf("%d figures marked as earlier run, want 2 (fs-micro, zz-unknown)", n)
	}
}
