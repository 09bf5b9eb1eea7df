//go:build linux

package cgroup

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/internal/procfs"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// ops are what the test binary does as a helper process (testutil.RunOp).
var ops = map[string]testutil.Op{"threads": threadsHelper}

func TestMain(m *testing.M) {
	testutil.RunOp(ops)
	os.Exit(m.Run())
}

// threadsHelper pins goroutines to their own OS threads so the process has
// several threads for the move test, then waits to be killed.
func threadsHelper([]string) int {
	const extra = 4
	ready := make(chan struct{})
	for range extra {
		go func() {
			runtime.LockOSThread()
			ready <- struct{}{}
			select {}
		}()
	}
	for range extra {
		<-ready
	}
	fmt.Println("ready")
	// A sleep, not select{}: with every goroutine blocked forever the runtime
	// would abort the helper as deadlocked.
	time.Sleep(time.Hour)
	return 0
}

// independentCgroup2Mount finds the cgroup2 mount with its own few lines,
// so the package's parser is not checked against itself.
func independentCgroup2Mount(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" && f[3] == "/" {
				return f[4]
			}
		}
	}
	return ""
}

func requireSessions(t *testing.T) Config {
	t.Helper()
	testutil.RequireRoot(t)
	mount := independentCgroup2Mount(t)
	if mount == "" {
		testutil.SkipUnlessVM(t, "no cgroup2 filesystem mounted on this machine (see /proc/self/mountinfo)")
	}
	got, err := Cgroup2Mount()
	if err != nil || got != mount {
		t.Fatalf("Cgroup2Mount() = %q, %v; mountinfo says %q", got, err, mount)
	}
	cfg := Config{Parent: fmt.Sprintf("oxsupervise-test-%d", os.Getpid())}
	t.Cleanup(func() {
		// Shared by the tests of this process: gone once the last one is removed.
		unix.Rmdir(filepath.Join(mount, cfg.Parent))
	})
	return cfg
}

func newGroup(t *testing.T, cfg Config, limits Limits) *Group {
	t.Helper()
	id := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	g, err := NewSession(cfg, id, limits)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := g.Kill(ctx); err != nil {
			t.Errorf("cleanup kill: %v", err)
		}
		if err := g.Remove(ctx); err != nil {
			t.Errorf("cleanup remove: %v", err)
		}
	})
	return g
}

// startIn starts cmd already inside g through CLONE_INTO_CGROUP.
func startIn(t *testing.T, g *Group, cmd *exec.Cmd) {
	t.Helper()
	fd, err := g.OpenFD()
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v in %s: %v", cmd.Args, g.Path, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}

func procCgroup(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest
		}
	}
	t.Fatalf("%s has no 0:: line:\n%s", path, b)
	return ""
}

func TestStartInsideWithCgroupFD(t *testing.T) {
	cfg := requireSessions(t)
	g := newGroup(t, cfg, Limits{})
	cmd := exec.Command("sleep", "60")
	startIn(t, g, cmd)
	pid := cmd.Process.Pid

	want := "/" + cfg.Parent + "/" + g.ID
	if got := procCgroup(t, fmt.Sprintf("/proc/%d/cgroup", pid)); got != want {
		t.Errorf("/proc/%d/cgroup: %q, want %q", pid, got, want)
	}
	if got, err := CgroupOf(pid); err != nil || got != want {
		t.Errorf("CgroupOf(%d) = %q, %v; want %q", pid, got, err, want)
	}
	if id, ok, err := SessionOf(cfg, pid); err != nil || !ok || id != g.ID {
		t.Errorf("SessionOf(%d) = %q, %v, %v; want %q", pid, id, ok, err, g.ID)
	}
	if _, ok, err := SessionOf(cfg, os.Getpid()); err != nil || ok {
		t.Errorf("SessionOf(test process) = in a session %v, %v; want not in one", ok, err)
	}
	procs, err := g.Procs()
	if err != nil || !slices.Equal(procs, []int{pid}) {
		t.Errorf("Procs() = %v, %v; want [%d]", procs, err, pid)
	}
	ids, err := ListSessions(cfg)
	if err != nil || !slices.Contains(ids, g.ID) {
		t.Errorf("ListSessions = %v, %v; want it to hold %q", ids, err, g.ID)
	}
	opened, err := OpenSession(cfg, g.ID)
	if err != nil || opened.Path != g.Path || opened.CgroupID != g.CgroupID {
		t.Errorf("OpenSession = %+v, %v; want %+v", opened, err, g)
	}
}

func TestCgroupIDIsDirInode(t *testing.T) {
	cfg := requireSessions(t)
	g := newGroup(t, cfg, Limits{})
	var st unix.Stat_t
	if err := unix.Stat(g.Path, &st); err != nil {
		t.Fatal(err)
	}
	if g.CgroupID != st.Ino {
		t.Errorf("CgroupID = %d, inode of %s = %d", g.CgroupID, g.Path, st.Ino)
	}
	// kernfs file handles carry the cgroup id the kernel hands to BPF
	// (cgroup_id()), an independent source from stat.
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, g.Path, 0)
	if err != nil {
		t.Skipf("SKIP (second check): name_to_handle_at on cgroupfs: %v", err)
	}
	if b := h.Bytes(); len(b) != 8 || binary.NativeEndian.Uint64(b) != g.CgroupID {
		t.Errorf("file handle of %s = %x, want the cgroup id %d", g.Path, b, g.CgroupID)
	}
}

func TestAddProcessMovesEveryThread(t *testing.T) {
	for _, groupType := range []string{"domain", "threaded"} {
		t.Run(groupType, func(t *testing.T) { testAddProcess(t, groupType) })
	}
}

func testAddProcess(t *testing.T, groupType string) {
	cfg := requireSessions(t)
	if groupType == "threaded" {
		// Its parent turns "domain threaded": keep it apart from the other tests.
		cfg.Parent += "-threaded"
		mount := independentCgroup2Mount(t)
		t.Cleanup(func() { unix.Rmdir(filepath.Join(mount, cfg.Parent)) })
	}
	g := newGroup(t, cfg, Limits{})
	if groupType == "threaded" {
		if err := os.WriteFile(filepath.Join(g.Path, "cgroup.type"), []byte("threaded"), 0); err != nil {
			t.Fatalf("make the group threaded: %v", err)
		}
	}
	cmd := testutil.OpCommand("threads")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	pid := cmd.Process.Pid
	tids, err := Tasks(pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(tids) < 5 {
		t.Fatalf("helper has %d threads, want at least 5", len(tids))
	}
	t.Cleanup(func() {
		if !alive(pid) {
			t.Errorf("the helper %d died during the test", pid)
		}
	})
	if typ, err := g.Type(); err != nil || typ != groupType {
		t.Fatalf("session group type = %q, %v; want %s", typ, err, groupType)
	}

	if err := g.AddProcess(pid); err != nil {
		t.Fatalf("AddProcess: %v", err)
	}
	want := "/" + cfg.Parent + "/" + g.ID
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if got := procCgroup(t, fmt.Sprintf("/proc/%d/task/%s/cgroup", pid, e.Name())); got != want {
			t.Errorf("thread %s is in %q, want %q", e.Name(), got, want)
		}
	}
	threads, err := g.Threads()
	if err != nil {
		t.Fatal(err)
	}
	// The Go runtime of the helper may add threads at any time (they are born
	// in the group), so: every thread seen before the move is in the group, and
	// the group holds nothing but this process's threads.
	for _, tid := range tids {
		if !slices.Contains(threads, tid) {
			t.Errorf("thread %d of pid %d is missing from the group's threads %v", tid, pid, threads)
		}
	}
	for _, tid := range threads {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, tid)); err != nil {
			t.Errorf("group thread %d is not a thread of pid %d: %v", tid, pid, err)
		}
	}
}

func readEvents(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		m[k] = v
	}
	return m
}

func TestFreezeThaw(t *testing.T) {
	cfg := requireSessions(t)
	g := newGroup(t, cfg, Limits{})
	if _, err := os.Stat(filepath.Join(g.Path, "cgroup.freeze")); err != nil {
		t.Skipf("SKIP: this kernel has no cgroup v2 freezer (%v)", err)
	}
	startIn(t, g, exec.Command("sleep", "60"))
	ctx := context.Background()

	if err := g.Freeze(ctx); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if ev := readEvents(t, g.Path); ev["frozen"] != "1" {
		t.Errorf("after Freeze cgroup.events = %v, want frozen 1", ev)
	}
	if frozen, err := g.Frozen(); err != nil || !frozen {
		t.Errorf("Frozen() = %v, %v after Freeze", frozen, err)
	}
	if err := g.Thaw(ctx); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	if ev := readEvents(t, g.Path); ev["frozen"] != "0" {
		t.Errorf("after Thaw cgroup.events = %v, want frozen 0", ev)
	}
	if frozen, err := g.Frozen(); err != nil || frozen {
		t.Errorf("Frozen() = %v, %v after Thaw", frozen, err)
	}
}

func alive(pid int) bool { return procfs.Alive(pid) }

func TestKillReachesEscapedGrandchild(t *testing.T) {
	tests := []struct {
		name string
		kill func(*Group, context.Context) error
	}{
		{"cgroup.kill", (*Group).Kill},
		{"signal fallback", (*Group).killBySignal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := requireSessions(t)
			g := newGroup(t, cfg, Limits{})
			// The shell exits at once: the sleep is reparented and in its own session.
			cmd := exec.Command("sh", "-c", "setsid nohup sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			startIn(t, g, cmd)
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatalf("read grandchild pid: %v", err)
			}
			cmd.Wait()
			grandchild, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatal(err)
			}
			if !alive(grandchild) {
				t.Fatalf("grandchild %d is not running before the kill", grandchild)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tt.kill(g, ctx); err != nil {
				t.Fatalf("kill: %v", err)
			}
			if ev := readEvents(t, g.Path); ev["populated"] != "0" {
				t.Errorf("after kill cgroup.events = %v, want populated 0", ev)
			}
			// The grandchild's new parent reaps it asynchronously.
			for deadline := time.Now().Add(5 * time.Second); alive(grandchild) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if alive(grandchild) {
				t.Errorf("setsid grandchild %d survived the kill", grandchild)
			}
		})
	}
}

func TestRemoveLeavesNothing(t *testing.T) {
	cfg := requireSessions(t)
	g, err := NewSession(cfg, "remove-me", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	startIn(t, g, exec.Command("sleep", "60"))
	// A nested group, as a workload with cgroupfs access might make.
	if err := os.Mkdir(filepath.Join(g.Path, "nested"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.Remove(ctx); err == nil {
		t.Fatal("Remove of a populated group succeeded")
	}
	if err := g.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(ctx); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := os.Stat(g.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Remove (stat: %v)", g.Path, err)
	}
	ids, err := ListSessions(cfg)
	if err != nil || slices.Contains(ids, "remove-me") {
		t.Errorf("ListSessions after Remove = %v, %v", ids, err)
	}
	if err := g.Remove(ctx); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

// A group below that removes itself while Remove walks the tree (a
// nested session's own end racing its parent session's) does not stop
// the walk: the parent's group is gone every time, whichever came first.
func TestRemoveWhileAGroupBelowRemovesItself(t *testing.T) {
	cfg := requireSessions(t)
	ctx := context.Background()
	for i := range 40 {
		g, err := NewSession(cfg, fmt.Sprintf("remove-race-%d", i), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		child := &Group{Path: filepath.Join(g.Path, "child")}
		for _, d := range []string{child.Path, filepath.Join(child.Path, "a"), filepath.Join(child.Path, "b"), filepath.Join(g.Path, "z")} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		childDone := make(chan error, 1)
		go func() { childDone <- child.Remove(ctx) }()
		err = g.Remove(ctx)
		if cerr := <-childDone; cerr != nil {
			t.Errorf("round %d: the group below: Remove: %v", i, cerr)
		}
		if err != nil {
			t.Fatalf("round %d: Remove: %v", i, err)
		}
		if _, err := os.Stat(g.Path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("round %d: %s left behind while a group below removed itself (stat: %v)", i, g.Path, err)
		}
	}
}

func TestNewSessionRefuses(t *testing.T) {
	cfg := requireSessions(t)
	g := newGroup(t, cfg, Limits{})
	if _, err := NewSession(cfg, g.ID, Limits{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second NewSession(%q) = %v, want an 'already exists' error", g.ID, err)
	}
	mount := independentCgroup2Mount(t)
	for _, id := range []string{"../escape", "a/b", ".."} {
		if _, err := NewSession(cfg, id, Limits{}); err == nil {
			t.Errorf("NewSession(%q) succeeded", id)
		}
	}
	if _, err := os.Stat(filepath.Join(mount, "escape")); err == nil {
		t.Errorf("NewSession(../escape) created %s", filepath.Join(mount, "escape"))
	}
	if _, err := NewSession(Config{Mount: "/proc", Parent: cfg.Parent}, "x", Limits{}); err == nil ||
		!strings.Contains(err.Error(), "not a cgroup2 filesystem") {
		t.Errorf("NewSession on /proc = %v, want 'not a cgroup2 filesystem'", err)
	}
}

func TestLimitsAppliedOrReported(t *testing.T) {
	cfg := requireSessions(t)
	mount := independentCgroup2Mount(t)
	b, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	rootControllers := strings.Fields(string(b))
	limits := Limits{PidsMax: 64, MemoryMax: 256 << 20}
	g := newGroup(t, cfg, limits)

	for _, c := range []struct {
		controller, file string
		value            int64
	}{{"pids", "pids.max", limits.PidsMax}, {"memory", "memory.max", limits.MemoryMax}} {
		var warn *LimitWarning
		for i := range g.Warnings {
			if g.Warnings[i].Controller == c.controller {
				warn = &g.Warnings[i]
			}
		}
		if !slices.Contains(rootControllers, c.controller) {
			wantReason := c.controller + " controller not available in cgroup2"
			if warn == nil || !strings.Contains(warn.Reason, wantReason) || warn.Limit != c.file || warn.Value != c.value {
				t.Errorf("%s: cgroup2 lacks the controller; warning = %+v, want one saying %q", c.file, warn, wantReason)
			}
			t.Logf("reported as expected: %s", warn)
			continue
		}
		if warn != nil {
			t.Errorf("%s: controller exists in cgroup2 but the limit was not applied: %s", c.file, warn)
			continue
		}
		got, err := os.ReadFile(filepath.Join(g.Path, c.file))
		if err != nil || strings.TrimSpace(string(got)) != strconv.FormatInt(c.value, 10) {
			t.Errorf("%s = %q, %v; want %d", c.file, got, err, c.value)
		}
		t.Logf("applied as expected: %s=%d", c.file, c.value)
	}
}

func TestDescendants(t *testing.T) {
	cfg := requireSessions(t)
	g := newGroup(t, cfg, Limits{})
	cmd := exec.Command("sh", "-c", `sleep 600 & sh -c 'sleep 600 & wait' & wait`)
	startIn(t, g, cmd)
	root := cmd.Process.Pid

	// Wait until the group holds the whole tree: sh, sleep, sh, sleep.
	var procs []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if procs, _ = g.Procs(); len(procs) == 4 {
			break
		}
	}
	if len(procs) != 4 {
		t.Fatalf("group holds %v, want 4 processes", procs)
	}
	got, err := Descendants(root)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(slices.Clone(procs), func(p int) bool { return p == root })
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Descendants(%d) = %v, want %v", root, got, want)
	}
	if got, err := childrenByScan(root); err != nil || len(got) != 2 {
		t.Errorf("childrenByScan(%d) = %v, %v; want 2 children", root, got, err)
	}
	if _, err := Descendants(1 << 30); err == nil {
		t.Error("Descendants of a nonexistent pid succeeded")
	}
}

// ResolvedIn finds the cgroup2 mount Resolved finds, in the mounts given
// instead of a read of its own, and refuses what Resolved refuses: no
// cgroup2 among them, or a mount point that is not cgroup2.
func TestResolvedInIsResolved(t *testing.T) {
	want, err := Config{}.Resolved()
	if err != nil {
		t.Skipf("SKIPPED, NOT PASSED: no cgroup2 mount here: %v", err)
	}
	real, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		mounts  []mountinfo.Mount
		want    string
		wantErr error
	}{
		{"this process's mounts", real, want.Mount, nil},
		{"no cgroup2 among them", []mountinfo.Mount{{Root: "/", Point: "/", FSType: "ext4"}}, "", ErrNoCgroup2},
		{"a cgroup2 mount point that is not one", []mountinfo.Mount{{Root: "/", Point: t.TempDir(), FSType: "cgroup2"}}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Config{}.ResolvedIn(tc.mounts)
			switch {
			case tc.want != "" && (err != nil || got.Mount != tc.want):
				t.Fatalf("ResolvedIn: mount %q (%v), Resolved found %q", got.Mount, err, tc.want)
			case tc.want == "" && err == nil:
				t.Fatalf("ResolvedIn resolved %q", got.Mount)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("ResolvedIn: %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestMigrateSelfInPlaceMovesNothing: the migration that starts an RCU
// grace period ahead of a nested launcher's move leaves the caller in its
// own group and moves no other process (here one in a session group).
func TestMigrateSelfInPlaceMovesNothing(t *testing.T) {
	cfg := requireSessions(t)
	mount, err := Cgroup2Mount()
	if err != nil {
		t.Fatal(err)
	}
	g := newGroup(t, cfg, Limits{})
	sleep := exec.Command("sleep", "100")
	startIn(t, g, sleep)
	self, other := "/proc/self/cgroup", fmt.Sprintf("/proc/%d/cgroup", sleep.Process.Pid)
	ownBefore, otherBefore := procCgroup(t, self), procCgroup(t, other)
	for round := range 2 { // the second within the first's grace period
		if err := MigrateSelfInPlace(mount); err != nil {
			t.Fatalf("round %d: MigrateSelfInPlace: %v", round, err)
		}
	}
	if own := procCgroup(t, self); own != ownBefore {
		t.Errorf("the caller moved from %s to %s", ownBefore, own)
	}
	if o := procCgroup(t, other); o != otherBefore || !strings.HasSuffix(g.Path, o) {
		t.Errorf("another process moved from %s to %s (its group is %s)", otherBefore, o, g.Path)
	}
}

// TestProbeMigration: the probe times two real migrations of the caller,
// each of which leaves it in its own group, and a mount it cannot write
// is an error that names the move; what the timings mean is
// TestWaitsForGracePeriod's.
func TestProbeMigration(t *testing.T) {
	requireSessions(t)
	mount, err := Cgroup2Mount()
	if err != nil {
		t.Fatal(err)
	}
	before := procCgroup(t, "/proc/self/cgroup")
	c, err := ProbeMigration(mount, 0)
	if err != nil {
		t.Fatalf("ProbeMigration: %v", err)
	}
	if c.Quiet <= 0 || c.Warm <= 0 {
		t.Errorf("ProbeMigration = %+v, want two positive timings", c)
	}
	if after := procCgroup(t, "/proc/self/cgroup"); after != before {
		t.Errorf("the probe moved the caller from %s to %s", before, after)
	}
	if _, err := ProbeMigration(t.TempDir(), 0); err == nil || !strings.Contains(err.Error(), "move this process into its own group") {
		t.Errorf("ProbeMigration below a directory that is no cgroup2 mount: err = %v, want the move's error", err)
	}
}

func TestWaitsForGracePeriod(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name        string
		quiet, warm time.Duration
		want        bool
	}{
		{"a grace period's wait", 9 * ms, ms / 5, true},
		{"at the floor", gracePeriodFloor + ms/10, ms / 10, true},
		{"no wait", ms / 4, ms / 10, false},
		{"the warm one slower", ms / 10, 2 * ms, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (MigrationCost{Quiet: tt.quiet, Warm: tt.warm}).WaitsForGracePeriod(); got != tt.want {
				t.Errorf("WaitsForGracePeriod(quiet %v, warm %v) = %v, want %v", tt.quiet, tt.warm, got, tt.want)
			}
		})
	}
}
