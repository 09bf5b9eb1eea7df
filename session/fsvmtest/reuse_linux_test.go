//go:build linux

package fsvmtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
)

// A standalone run leaves its BPF-LSM programs pinned, and the next run
// enforces with those very programs (same kernel ids) instead of loading
// and verifying them again: its session is in their session map while it
// runs, and a write outside the workspace is still refused and audited.
func TestStandaloneRunReusesPinnedFSPrograms(t *testing.T) {
	requireBPFLSM(t)
	e := newEnv(t)
	pins, err := os.MkdirTemp(loader.BPFFSMount, "oxs-fsreuse-")
	if err != nil {
		testutil.SkipUnlessVM(t, "no bpffs at %s: %v", loader.BPFFSMount, err)
	}
	t.Cleanup(func() { os.RemoveAll(pins) })
	pinEnv := []string{"OXSUPERVISE_PIN_DIR=" + pins}

	if code, _, stderr := e.runCLI(t, pinEnv, "true"); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	if _, layers := sessionOf(t, e.auditLog, 0); !strings.Contains(layers, "bpf-lsm") {
		t.Fatalf("first session's layers %q lack bpf-lsm", layers)
	}
	sets, _ := filepath.Glob(filepath.Join(pins, "run", loader.ObjectsVersion()+"-ring*", "fs"))
	if len(sets) != 1 {
		t.Fatalf("pinned filesystem sets after the first run: %v, want one", sets)
	}
	set := loader.Generation{Dir: sets[0]}
	first := programIDs(t, set)

	fifo := filepath.Join(e.ws, "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	type res struct {
		code           int
		stdout, stderr string
	}
	done := make(chan res, 1)
	go func() {
		code, stdout, stderr := e.runCLI(t, pinEnv, `"$SELF" `+fsopVerb+` write "$OUT/new.txt"; echo "$OXSUPERVISE_SESSION" > session-id; read x < gate`)
		done <- res{code, stdout, stderr}
	}()
	gate, err := os.OpenFile(fifo, os.O_WRONLY, 0) // returns once the command reads
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(e.ws, "session-id"))
	var keys []uint64
	var g *cgroup.Group
	if err == nil {
		g, err = cgroup.OpenSession(cgroup.Config{}, strings.TrimSpace(string(b)))
	}
	if err == nil {
		keys, err = set.SessionKeys("fs_sessions")
	}
	gate.Write([]byte("go\n"))
	gate.Close()
	r := <-done
	if err != nil {
		t.Fatal(err)
	}
	if r.code != 0 {
		t.Fatalf("second run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !slices.Contains(keys, g.CgroupID) {
		t.Fatalf("second run's session (cgroup %d) not in the pinned programs' fs_sessions %v: it loaded programs of its own", g.CgroupID, keys)
	}
	if again := programIDs(t, set); !slices.Equal(again, first) {
		t.Fatalf("pinned programs %v after the second run, want the first run's %v", again, first)
	}
	if _, err := os.Lstat(filepath.Join(e.outside, "new.txt")); err == nil {
		t.Error("outside/new.txt exists: the reused programs let the write through")
	}
	id, _ := sessionOf(t, e.auditLog, 1)
	expectDenial(t, e.auditLog, id, "create", filepath.Join(e.outside, "new.txt"))
}

func programIDs(t *testing.T, g loader.Generation) []ebpf.ProgramID {
	t.Helper()
	ids, err := g.ProgramIDs()
	if err != nil || len(ids) == 0 {
		t.Fatalf("pinned programs of %s: %v (%v)", g.Dir, ids, err)
	}
	return ids
}
