package main

import (
	"os/exec"
	"strings"
	"testing"
)

// allowed are the only packages outside the standard library the launcher
// program may link: it starts in every session, so what it links is what
// each session's start pays for (package launcher's doc).
var allowed = map[string]bool{
	"github.com/openoxide/oxsupervise/cmd/oxsupervise-launch": true,
	"github.com/openoxide/oxsupervise/launcher":               true,
	"github.com/openoxide/oxsupervise/internal/shquote":       true,
	"golang.org/x/sys/unix":                                   true,
}

// TestDependencies: the launcher program links the standard library,
// golang.org/x/sys and package launcher, nothing of the supervisor
// (policy, BPF loaders, the daemon's exporters).
func TestDependencies(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("SKIPPED, NOT PASSED: no go tool to list the dependencies: %v", err)
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var linked []string
	for _, p := range strings.Fields(string(out)) {
		linked = append(linked, p)
		if !allowed[p] {
			t.Errorf("the launcher program links %s", p)
		}
	}
	if len(linked) != len(allowed) {
		t.Errorf("linked %v, want exactly %d packages beyond the standard library", linked, len(allowed))
	}
}
