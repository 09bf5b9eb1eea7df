//go:build linux

package fsvm_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/bench/internal/work"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/policy"
)

const (
	macroFigure  = "fs-vm-macro"
	mapMemFigure = "fs-vm-mapmem"
	macroFiles   = 20000
	macroRounds  = 3
	macroPkgs    = 20
)

// MacroMetrics are the steps childMacro times, in display order.
var macroMetrics = []string{"untar 20k files", "git add -A", "git status", "go build (20 pkgs, warm cache)"}

// emit prints one marker line oxbench parses out of the VM console.
func emit(kind string, v any) {
	b, _ := json.Marshal(v)
	fmt.Printf("%s%s %s\n", marker, kind, b)
}

// childMacro runs the macro steps in dir (whose tree/ already holds an
// initialised git repository) and prints each step's wall time. It runs
// inside the session, so every process it starts does too.
func childMacro(dir, tarball, mod, gocache string) int {
	tree := filepath.Join(dir, "tree")
	gitEnv := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b"}
	steps := []struct {
		metric, cwd string
		env         []string
		argv        []string
	}{
		{macroMetrics[0], tree, nil, []string{"tar", "-xf", tarball}},
		{macroMetrics[1], tree, gitEnv, []string{"git", "add", "-A"}},
		{macroMetrics[2], tree, gitEnv, []string{"git", "status", "--porcelain"}},
		{macroMetrics[3], mod, work.GoEnv(gocache, dir), []string{"go", "build", "./..."}},
	}
	out := map[string]float64{}
	for _, s := range steps {
		cmd := exec.Command(s.argv[0], s.argv[1:]...)
		cmd.Dir = s.cwd
		cmd.Env = append(os.Environ(), s.env...)
		start := time.Now()
		b, err := cmd.CombinedOutput()
		out[s.metric] = float64(time.Since(start).Nanoseconds())
		if err != nil {
			fmt.Fprintf(os.Stderr, "%v: %v: %s\n", s.argv, err, b)
			return 1
		}
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// hostPreparedGo returns the directory where oxbench put the macro's
// module and a build cache filled on the host (bin/oxbench-vm in the
// repository, seen by the guest through its copy-on-write view of the
// host root; the test runs in its package directory).
func hostPreparedGo() (string, bool) {
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	dir := filepath.Join(wd, "..", "..", "bin", "oxbench-vm")
	if _, err := os.Stat(filepath.Join(dir, "mod", "go.mod")); err != nil {
		return "", false
	}
	if _, err := os.Stat(filepath.Join(dir, "gocache")); err != nil {
		return "", false
	}
	return filepath.Clean(dir), true
}

// TestFSGuardMacro times a 20 000-file untar, git add -A, git status and a
// cached go build outside any session and inside a BPF-LSM session whose
// writable root holds the work. Its assertion is that the session really
// refuses a write outside that root.
func TestFSGuardMacro(t *testing.T) {
	if os.Getenv(testutil.VMTestEnv) != "1" || !runRequested("TestFSGuardMacro") {
		t.Skip("SKIPPED, NOT PASSED: the BPF-LSM macro benchmark runs only in the kernel-test VM when asked for: `go run ./bench/cmd/oxbench ... vm` (make bench)")
	}
	testutil.RequireRoot(t)
	g := loadGuard(t)

	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tarball := filepath.Join(base, "tree.tar")
	small := filepath.Join(base, "small.tar")
	if err := work.WriteTree(tarball, macroFiles); err != nil {
		t.Fatal(err)
	}
	if err := work.WriteTree(small, 200); err != nil {
		t.Fatal(err)
	}
	// The module and its cache live on the guest's tmpfs: fsguard refuses a
	// writable root on the overlay through which the guest sees the host.
	goDir := filepath.Join(base, "go")
	if err := os.MkdirAll(goDir, 0o755); err != nil {
		t.Fatal(err)
	}
	hostDir, prepared := hostPreparedGo()
	if prepared {
		if out, err := exec.Command("cp", "-a", filepath.Join(hostDir, "mod"), filepath.Join(hostDir, "gocache"), goDir).CombinedOutput(); err != nil {
			t.Fatalf("copy the host's module and GOCACHE: %v: %s", err, out)
		}
	} else {
		// Run by hand: the build below fills the cache, which takes
		// minutes under TCG.
		if err := os.MkdirAll(filepath.Join(goDir, "mod"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := work.WriteModule(filepath.Join(goDir, "mod"), macroPkgs); err != nil {
			t.Fatal(err)
		}
	}
	mod, gocache := filepath.Join(goDir, "mod"), filepath.Join(goDir, "gocache")
	// The timed build must be a cached one (a cold build under TCG takes
	// minutes): fill or check the cache outside the session, untimed.
	build := exec.Command("go", "build", "./...")
	build.Dir = mod
	build.Env = append(os.Environ(), work.GoEnv(gocache, goDir)...)
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("fill GOCACHE: %v: %s", err, out)
	}
	t.Logf("untimed build outside the session (cache prepared on the host: %v) took %v", prepared, time.Since(start))

	// Two writable roots, as an agent building Go needs: the workspace
	// and the module with its build cache.
	c := &policy.Compiled{Mode: policy.ModeWorkspaceWrite, FilesystemRules: true,
		Workspace: anchor(t, ws), WritableRoots: []policy.Anchor{anchor(t, ws), anchor(t, goDir)}, ProtectedPatterns: patterns}
	cg := testutil.NewCgroup(t)
	id, err := cgroup.ID(cg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AddSession(id, c); err != nil {
		t.Fatalf("add session: %v", err)
	}
	t.Cleanup(func() { g.RemoveSession(id) })
	out, err := runChild(t, cg.Dir, "create", filepath.Join(outside, "denied"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := strconv.Atoi(strings.TrimSpace(string(out))); syscall.Errno(got) != syscall.EACCES && syscall.Errno(got) != syscall.EPERM {
		t.Fatalf("session does not enforce: create outside its root: errno %d (%v), want EACCES", got, syscall.Errno(got))
	}

	vs := []variant{{name: "no session"}, {name: "BPF-LSM session (2 anchors)", cgroup: cg.Dir}}
	emit("header", map[string]any{"figure": macroFigure, "variants": []string{vs[0].name, vs[1].name},
		"metrics": macroMetrics, "rounds": macroRounds, "n": macroFiles, "hooks": len(g.Hooks())})
	trialNo := 0
	trial := func(v variant, tar string) map[string]float64 {
		trialNo++
		dir := filepath.Join(ws, fmt.Sprintf("t%d", trialNo))
		tree := filepath.Join(dir, "tree")
		if err := os.MkdirAll(tree, 0o755); err != nil {
			t.Fatal(err)
		}
		// git init writes .git/config and .git/hooks, names the session
		// protects: the repository is created outside it, untimed.
		if out, err := exec.Command("git", "-C", tree, "init", "-q").CombinedOutput(); err != nil {
			t.Fatalf("git init: %v: %s", err, out)
		}
		defer os.RemoveAll(dir)
		out, err := runChild(t, v.cgroup, "macro", dir, tar, mod, gocache)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		var m map[string]float64
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%s: worker printed %q: %v", v.name, out, err)
		}
		return m
	}
	for _, v := range vs {
		trial(v, small) // warm-up: binaries and libraries into the guest's page cache
	}
	for r := 0; r < macroRounds; r++ {
		for k := range vs {
			v := vs[(r+k)%len(vs)]
			emit("sample", map[string]any{"figure": macroFigure, "round": r, "variant": v.name, "values": trial(v, tarball)})
		}
	}
	fmt.Printf("%sdone %s\n", marker, macroFigure)
}

// mapInfo is what the kernel reports about one BPF map this process holds.
type mapInfo struct {
	name, typ           string
	keySize, valueSize  uint32
	maxEntries, memlock uint64
	entries             int // -1: the map type cannot be iterated
}

// bpfMaps lists the BPF maps open in this process whose kernel map id is
// not in skip, with the kernel's memlock accounting from fdinfo.
func bpfMaps(t *testing.T, skip map[uint64]bool) map[string]mapInfo {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mapInfo{}
	seen := map[uint64]bool{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, _ := os.Readlink("/proc/self/fd/" + e.Name()); link != "anon_inode:bpf-map" {
			continue
		}
		f, err := os.Open("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		var mi mapInfo
		var id uint64
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			v = strings.TrimSpace(v)
			switch k {
			case "memlock":
				mi.memlock, _ = strconv.ParseUint(v, 10, 64)
			case "max_entries":
				mi.maxEntries, _ = strconv.ParseUint(v, 10, 64)
			case "map_id":
				id, _ = strconv.ParseUint(v, 10, 64)
			}
		}
		f.Close()
		// A map held through two descriptors (a collection's clone of
		// a shared map) is one map.
		if skip[id] || seen[id] {
			continue
		}
		seen[id] = true
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ebpf.NewMapFromFD(dup)
		if err != nil {
			t.Fatalf("map fd %d: %v", fd, err)
		}
		info, err := m.Info()
		if err != nil {
			m.Close()
			t.Fatalf("map fd %d info: %v", fd, err)
		}
		mi.name, mi.typ, mi.keySize, mi.valueSize = info.Name, info.Type.String(), info.KeySize, info.ValueSize
		mi.entries = -1
		if info.Type == ebpf.Hash || info.Type == ebpf.LRUHash || info.Type == ebpf.LPMTrie {
			mi.entries = 0
			key := make([]byte, info.KeySize)
			var next []byte
			var cur any // nil: start from the first key
			for {
				next = make([]byte, info.KeySize)
				if err := m.NextKey(cur, &next); err != nil {
					break
				}
				mi.entries++
				copy(key, next)
				cur = key
			}
		}
		m.Close()
		name := mi.name
		for i := 2; out[name].name != ""; i++ {
			name = fmt.Sprintf("%s#%d", mi.name, i)
		}
		out[name] = mi
	}
	return out
}

// TestFSGuardMapMemory reports the kernel's memory accounting (memlock in
// fdinfo) of the BPF-LSM programs' maps with 0, 1 and 100 sessions, and how
// many map entries the sessions take. Its assertions: the maps exist and
// every added session wrote entries.
func TestFSGuardMapMemory(t *testing.T) {
	if os.Getenv(testutil.VMTestEnv) != "1" || !runRequested("TestFSGuardMapMemory") {
		t.Skip("SKIPPED, NOT PASSED: the BPF-LSM map memory figure runs only in the kernel-test VM when asked for: `go run ./bench/cmd/oxbench ... vm` (make bench)")
	}
	testutil.RequireRoot(t)
	// Maps this process held before loading are not fsguard's. They are
	// told apart by kernel map id: fd numbers are reused.
	before := map[uint64]bool{}
	ents, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		raw, _ := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "map_id:"); ok {
				id, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				before[id] = true
			}
		}
	}
	g := loadGuard(t)
	ws := t.TempDir()
	c := &policy.Compiled{Mode: policy.ModeWorkspaceWrite, FilesystemRules: true,
		Workspace: anchor(t, ws), WritableRoots: []policy.Anchor{anchor(t, ws)}, ProtectedPatterns: patterns}

	snapshots := map[int]map[string]mapInfo{0: bpfMaps(t, before)}
	if len(snapshots[0]) == 0 {
		t.Fatal("fsguard.Load left no BPF map open in this process")
	}
	// Session keys are cgroup ids; the maps do not check that a group
	// exists, so ids of groups never created give the same entries.
	const idBase = uint64(1) << 40
	added := 0
	for _, n := range []int{1, 100} {
		for ; added < n; added++ {
			if err := g.AddSession(idBase+uint64(added), c); err != nil {
				t.Fatalf("add session %d: %v", added, err)
			}
		}
		snapshots[n] = bpfMaps(t, before)
	}
	defer func() {
		for i := 0; i < added; i++ {
			g.RemoveSession(idBase + uint64(i))
		}
	}()
	total := func(s map[string]mapInfo) (mem uint64, entries int) {
		for _, m := range s {
			mem += m.memlock
			if m.entries > 0 {
				entries += m.entries
			}
		}
		return mem, entries
	}
	if _, e1 := total(snapshots[1]); e1 == 0 {
		t.Fatal("a session wrote no map entry")
	}
	names := make([]string, 0, len(snapshots[0]))
	for n := range snapshots[0] {
		names = append(names, n)
	}
	sort.Strings(names)
	emit("table", map[string]any{"figure": mapMemFigure,
		"headers": []string{"map", "type", "max entries", "key+value bytes", "memlock, 0 sessions", "memlock, 1 session", "memlock, 100 sessions", "entries 0 / 1 / 100 sessions"}})
	count := func(m mapInfo) string {
		if m.entries < 0 {
			return "–"
		}
		return strconv.Itoa(m.entries)
	}
	var payloadPerSession uint64
	for _, n := range names {
		m0, m1, m100 := snapshots[0][n], snapshots[1][n], snapshots[100][n]
		emit("row", map[string]any{"figure": mapMemFigure, "cells": []string{n, m0.typ, strconv.FormatUint(m0.maxEntries, 10),
			strconv.Itoa(int(m0.keySize + m0.valueSize)), strconv.FormatUint(m0.memlock, 10), strconv.FormatUint(m1.memlock, 10), strconv.FormatUint(m100.memlock, 10),
			count(m0) + " / " + count(m1) + " / " + count(m100)}})
		if m100.entries > 0 {
			payloadPerSession += uint64(m100.entries-m0.entries) * uint64(m0.keySize+m0.valueSize) / 100
		}
	}
	// A ring buffer's pages are allocated at load; kernels before 6.4
	// leave them out of memlock.
	var ringUnaccounted uint64
	for _, m := range snapshots[0] {
		if m.typ == ebpf.RingBuf.String() && m.memlock == 0 {
			ringUnaccounted += m.maxEntries
		}
	}
	mem0, e0 := total(snapshots[0])
	mem1, e1 := total(snapshots[1])
	mem100, e100 := total(snapshots[100])
	emit("row", map[string]any{"figure": mapMemFigure, "cells": []string{"**all maps**", "", "", "", strconv.FormatUint(mem0, 10), strconv.FormatUint(mem1, 10), strconv.FormatUint(mem100, 10),
		fmt.Sprintf("%d / %d / %d", e0, e1, e100)}})
	emit("summary", map[string]any{"figure": mapMemFigure, "memlock0": mem0, "memlock1": mem1, "memlock100": mem100,
		"entries_per_session": float64(e100-e0) / 100, "payload_per_session": payloadPerSession, "anchors": len(c.WritableRoots), "patterns": len(patterns), "ring_unaccounted": ringUnaccounted})
	fmt.Printf("%sdone %s\n", marker, mapMemFigure)
}
