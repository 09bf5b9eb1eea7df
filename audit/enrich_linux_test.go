//go:build linux

package audit

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestProcEnricher(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep to enrich from: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	enrich := ProcEnricher(time.Second)

	r := &Record{Process: &Process{PID: cmd.Process.Pid, Name: "given-by-kernel"}}
	enrich(r)
	if r.Process.Name != "given-by-kernel" {
		t.Errorf("enrichment replaced the producer's process.name with %q", r.Process.Name)
	}
	if !strings.HasSuffix(r.Process.Executable, "/sleep") {
		t.Errorf("process.executable = %q, want the sleep binary", r.Process.Executable)
	}
	if r.Process.CommandLine != "sleep 30" {
		t.Errorf("process.command_line = %q, want %q", r.Process.CommandLine, "sleep 30")
	}
	if r.Process.Parent == nil || r.Process.Parent.PID != os.Getpid() {
		t.Errorf("process.parent = %+v, want pid %d", r.Process.Parent, os.Getpid())
	}
	want := []string{"process.executable", "process.command_line", "process.parent.pid"}
	if !slices.Equal(r.Ox.Enriched, want) {
		t.Errorf("oxsupervise.enriched = %v, want %v", r.Ox.Enriched, want)
	}

	cmd.Process.Kill()
	cmd.Wait()
	// A burst's later records, written after the process exited, still
	// get what /proc said while it lived (procCacheTTL).
	later := &Record{Process: &Process{PID: cmd.Process.Pid}}
	enrich(later)
	if later.Process.CommandLine != "sleep 30" || !slices.Contains(later.Ox.Enriched, "process.command_line") {
		t.Errorf("a later record of the same pid got %+v (%v), want what was read while it lived", later.Process, later.Ox.Enriched)
	}
	// A pid never seen alive is not guessed at.
	gone := &Record{Process: &Process{PID: cmd.Process.Pid}}
	ProcEnricher(time.Second)(gone)
	if gone.Process.Executable != "" || gone.Process.CommandLine != "" || len(gone.Ox.Enriched) != 0 {
		t.Errorf("enrichment of an exited pid filled %+v (%v)", gone.Process, gone.Ox.Enriched)
	}
}

func TestProcEnricherTimesOut(t *testing.T) {
	// A FIFO stands in for a /proc file whose read blocks (cmdline of a
	// process holding its mm lock): the enricher must give up on time.
	root := t.TempDir()
	pidDir := root + "/77"
	if err := os.Mkdir(pidDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("mkfifo", pidDir+"/cmdline").Run(); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	enrich := procEnricher(root, 50*time.Millisecond)
	r := &Record{Process: &Process{PID: 77}}
	start := time.Now()
	enrich(r)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("enrichment blocked for %v", d)
	}
	if r.Process.CommandLine != "" {
		t.Fatalf("blocked lookup still filled command_line %q", r.Process.CommandLine)
	}
	// Unblock the stuck reader so the goroutine ends.
	if f, err := os.OpenFile(pidDir+"/cmdline", os.O_WRONLY, 0); err == nil {
		f.Close()
	}
}
