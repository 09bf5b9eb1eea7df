//go:build linux

package audit

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/procfs"
)

func TestProcEnricher(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep to enrich from: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Start returns once the close-on-exec pipe closes, which the kernel
	// does before it lays out the new image's arguments: until then
	// /proc/PID/cmdline reads empty. Wait for the arguments to exist.
	waitForCmdline(t, cmd.Process.Pid, "sleep\x0030\x00")
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
	want := []string{"process.executable", "process.command_line", "process.parent.pid",
		"process.parent.name", "process.parent.executable", "oxsupervise.ancestry"}
	if !slices.Equal(r.Ox.Enriched, want) {
		t.Errorf("oxsupervise.enriched = %v, want %v", r.Ox.Enriched, want)
	}
	// The parent is this test binary, then whatever started it.
	self, _ := os.Executable()
	if r.Process.Parent.Executable != self {
		t.Errorf("process.parent.executable = %q, want %q", r.Process.Parent.Executable, self)
	}
	chain := r.Ox.Ancestry
	if len(chain) == 0 || len(chain) > MaxAncestry || chain[0].PID != os.Getpid() || chain[0].Name != r.Process.Parent.Name {
		t.Fatalf("oxsupervise.ancestry = %+v, want this process (%d) first, at most %d", chain, os.Getpid(), MaxAncestry)
	}
	for i, a := range chain {
		if a.PID <= 1 || a.Name == "" {
			t.Errorf("ancestry[%d] = %+v: want a named process other than init", i, a)
		}
		if i > 0 {
			if ppid := ppidOf(t, chain[i-1].PID); ppid != a.PID {
				t.Errorf("ancestry[%d] = %d, but the parent of %d is %d", i, a.PID, chain[i-1].PID, ppid)
			}
		}
	}

	// A parent the producer gave (the kernel's word) is kept; the chain
	// starts from it.
	given := &Record{Process: &Process{PID: cmd.Process.Pid, Parent: &Parent{PID: os.Getppid()}}}
	enrich(given)
	if given.Process.Parent.PID != os.Getppid() || len(given.Ox.Ancestry) == 0 || given.Ox.Ancestry[0].PID != os.Getppid() {
		t.Errorf("with a given parent %d: parent %+v, ancestry %+v", os.Getppid(), given.Process.Parent, given.Ox.Ancestry)
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
	// Its parent, as a kernel producer names it, still gives the chain.
	orphan := &Record{Process: &Process{PID: cmd.Process.Pid, Parent: &Parent{PID: os.Getpid()}}}
	ProcEnricher(time.Second)(orphan)
	if orphan.Process.Executable != "" || len(orphan.Ox.Ancestry) == 0 || orphan.Ox.Ancestry[0].PID != os.Getpid() {
		t.Errorf("exited pid with a given parent: process %+v, ancestry %+v", orphan.Process, orphan.Ox.Ancestry)
	}
}

// The ancestors beyond the parent are read for their name and parent
// alone: an ancestor whose command line cannot be read (here a FIFO that
// would block until the deadline) is still in the chain.
func TestProcEnricherReadsAncestorsByName(t *testing.T) {
	root := t.TempDir()
	for _, p := range []struct {
		pid, ppid int
		name      string
	}{{10, 20, "tool"}, {20, 30, "parent"}, {30, 1, "grand"}} {
		dir := root + "/" + strconv.Itoa(p.pid)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/usr/bin/"+p.name, dir+"/exe"); err != nil {
			t.Fatal(err)
		}
		stat := strconv.Itoa(p.pid) + " (" + p.name + ") S " + strconv.Itoa(p.ppid) + " 1 1 0 -1 4194304 0 0\n"
		if err := os.WriteFile(dir+"/stat", []byte(stat), 0o600); err != nil {
			t.Fatal(err)
		}
		if p.pid == 30 {
			if err := exec.Command("mkfifo", dir+"/cmdline").Run(); err != nil {
				t.Skipf("SKIPPED, NOT PASSED: mkfifo: %v", err)
			}
			t.Cleanup(func() {
				// Unblock a reader that should not be there.
				if f, err := os.OpenFile(dir+"/cmdline", os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
			})
		} else if err := os.WriteFile(dir+"/cmdline", []byte(p.name+"\x00-x\x00"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := &Record{Process: &Process{PID: 10}}
	newEnricher(root, 200*time.Millisecond).Enrich(r)
	if r.Process.Executable != "/usr/bin/tool" || r.Process.CommandLine != "tool -x" {
		t.Errorf("process = %+v, want the executable and command line of pid 10", r.Process)
	}
	if r.Process.Parent == nil || r.Process.Parent.PID != 20 || r.Process.Parent.Executable != "/usr/bin/parent" || r.Process.Parent.Name != "parent" {
		t.Errorf("process.parent = %+v, want pid 20, parent, /usr/bin/parent", r.Process.Parent)
	}
	want := []Ancestor{{PID: 20, Name: "parent"}, {PID: 30, Name: "grand"}}
	if !slices.Equal(r.Ox.Ancestry, want) {
		t.Errorf("oxsupervise.ancestry = %+v, want %+v", r.Ox.Ancestry, want)
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
	enrich := newEnricher(root, 50*time.Millisecond).Enrich
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

func ppidOf(t *testing.T, pid int) int {
	t.Helper()
	st, err := procfs.ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.PPID
}

// waitForCmdline waits until /proc/PID/cmdline reads want.
func waitForCmdline(t *testing.T, pid int, want string) {
	t.Helper()
	path := "/proc/" + strconv.Itoa(pid) + "/cmdline"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && string(b) == want {
			return
		}
	}
	b, err := os.ReadFile(path)
	t.Fatalf("%s = %q (%v), want %q", path, b, err, want)
}
