//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A standalone run listens on its nested sessions' socket while its
// policy and host are worked out (host.ListenNestAhead): the session's
// command finds it there, and whether the session ran or the run was
// refused before any session existed, nothing of it is left in the
// socket directory once the run returned.
func TestStandaloneRunLeavesNoNestSocket(t *testing.T) {
	w := newNestWorld(t)
	for _, tc := range []struct {
		name     string
		flags    []string
		argv     []string
		wantCode int
		wantOut  string
	}{
		{"session ran", nil, []string{"sh", "-c", `test -S "$OXSUPERVISE_SUPERVISOR" && echo socket=yes`}, 0, "socket=yes"},
		{"refused at the policy's resolve", []string{"--writable-root", filepath.Join(w.base, "missing")}, []string{"true"}, exitUsage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.MkdirAll(w.nestDir, 0o711); err != nil {
				t.Fatal(err)
			}
			res := w.run(t, w.parent(append([]string{"--sandbox", "workspace-write"}, tc.flags...), tc.argv...))
			if res.code != tc.wantCode || !strings.Contains(res.stdout, tc.wantOut) {
				t.Fatalf("exit %d, stdout %q (want exit %d, %q); stderr:\n%s", res.code, res.stdout, tc.wantCode, tc.wantOut, res.stderr)
			}
			entries, err := os.ReadDir(w.nestDir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				t.Errorf("left in the socket directory: %s", e.Name())
			}
		})
	}
}
