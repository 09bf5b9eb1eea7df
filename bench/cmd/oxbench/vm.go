//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/openoxide/oxsupervise/bench/internal/work"
)

// vmSuite boots the kernel-test VM (internal/vmtest) once with the
// bench/fsvm benchmarks and turns what they print into figures: the
// filesystem microbenchmarks, the macro workload and the BPF map memory.
// Under TCG the guest is emulated, so only its ratios mean anything.
func vmSuite(ctx context.Context, e *env) ([]*report, error) {
	// The guest sees the host's root (copy-on-write), so a module and a
	// build cache prepared here spare the guest a cold build, which takes
	// minutes under TCG. bench/fsvm finds them at this path.
	goDir, err := filepath.Abs(filepath.Join(e.repo, "bin", "oxbench-vm"))
	if err != nil {
		return nil, err
	}
	if err := prepareVMGo(ctx, goDir); err != nil {
		return nil, fmt.Errorf("prepare the VM macro's Go module and cache: %w", err)
	}
	defer os.RemoveAll(goDir)
	argv := []string{"go", "run", "./internal/vmtest/cmd/vmtest", "-v", "--self-check=false",
		"--test-timeout", "15m", "--timeout", "17m",
		"--run", "^(" + strings.Join(vmTests, "|") + ")$", "--", "./bench/fsvm"}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = e.repo
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	runErr := cmd.Run()
	reps, done, parseErr := parseVMOutput(out.Bytes(), e.commandFor("vm"))
	took := time.Since(start).Round(time.Second).String()
	var finished []*report
	var missing []string
	for _, r := range reps {
		if done[r.ID] {
			r.Took = took + " (one VM boot for all VM figures)"
			finished = append(finished, r)
		} else {
			missing = append(missing, r.ID)
		}
	}
	for _, id := range []string{vmMicroFigure, vmMacroFigure, vmMapMemFigure} {
		if !done[id] && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	if runErr != nil || parseErr != nil || len(missing) > 0 {
		lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		os.WriteFile(e.out+"/fs-vm.log", out.Bytes(), 0o644)
		return finished, fmt.Errorf("vm benchmark: figures %v did not finish (run: %v, parse: %v); console in %s/fs-vm.log, last lines:\n%s",
			missing, runErr, parseErr, e.out, strings.Join(lines, "\n"))
	}
	return finished, nil
}

// The tests bench/fsvm runs in the VM and the figures they print.
var vmTests = []string{"TestFSGuardOverhead", "TestFSGuardMacro", "TestFSGuardMapMemory"}

const (
	vmMicroFigure  = "fs-vm-bpflsm"
	vmMacroFigure  = "fs-vm-macro"
	vmMapMemFigure = "fs-vm-mapmem"
)

// parseVMOutput reads the "OXBENCH-FSVM KIND JSON" lines of the console.
// A line without a "figure" field belongs to the microbenchmark figure.
func parseVMOutput(console []byte, command string) ([]*report, map[string]bool, error) {
	reps := map[string]*report{}
	var order []*report
	get := func(id string) *report {
		if id == "" {
			id = vmMicroFigure
		}
		if r := reps[id]; r != nil {
			return r
		}
		r := &report{ID: id, Title: vmTitles[id], Command: command, Unit: "ns",
			Samples: map[string]map[string][]float64{}, Failed: map[string]string{}}
		reps[id] = r
		order = append(order, r)
		return r
	}
	done := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(console))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const marker = "OXBENCH-FSVM "
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		i := strings.Index(line, marker)
		if i < 0 {
			continue
		}
		kind, payload, _ := strings.Cut(line[i+len(marker):], " ")
		if kind == "done" {
			if payload == "" {
				payload = vmMicroFigure
			}
			done[payload] = true
			continue
		}
		var l struct {
			Figure   string             `json:"figure"`
			Variants []string           `json:"variants"`
			Metrics  []string           `json:"metrics"`
			Rounds   int                `json:"rounds"`
			N        int                `json:"n"`
			Hooks    int                `json:"hooks"`
			Variant  string             `json:"variant"`
			Values   map[string]float64 `json:"values"`
			Reason   string             `json:"reason"`
			Headers  []string           `json:"headers"`
			Cells    []string           `json:"cells"`

			Memlock0          uint64  `json:"memlock0"`
			Memlock1          uint64  `json:"memlock1"`
			Memlock100        uint64  `json:"memlock100"`
			EntriesPerSession float64 `json:"entries_per_session"`
			PayloadPerSession uint64  `json:"payload_per_session"`
			Anchors           int     `json:"anchors"`
			Patterns          int     `json:"patterns"`
			RingUnaccounted   uint64  `json:"ring_unaccounted"`
		}
		if err := json.Unmarshal([]byte(payload), &l); err != nil {
			return order, done, fmt.Errorf("vm %s line %q: %w", kind, payload, err)
		}
		r := get(l.Figure)
		switch kind {
		case "header":
			r.Names, r.Metrics, r.Rounds = l.Variants, l.Metrics, l.Rounds
			for _, m := range l.Metrics {
				r.Samples[m] = map[string][]float64{}
			}
			r.Notes = append(r.Notes, vmNotes(r.ID, l.N, l.Hooks)...)
		case "sample":
			for m, v := range l.Values {
				if r.Samples[m] != nil {
					r.Samples[m][l.Variant] = append(r.Samples[m][l.Variant], v)
				}
			}
		case "failed":
			r.Failed[l.Variant] = l.Reason
		case "table":
			r.Unit, r.Samples, r.Headers = "bytes", nil, l.Headers
		case "row":
			r.Rows = append(r.Rows, l.Cells)
		case "summary":
			r.Notes = append(r.Notes,
				fmt.Sprintf("**Per session: %d bytes of kernel memory** (memlock of all maps: %s with no session, %s with 1, %s with 100). The maps are preallocated hash maps, ring buffer and arrays, sized once when the programs load; a session only fills slots. A session of %d writable root and %d protected-name patterns takes %.0f entries across the maps (table), %s of key+value payload in slots that are already paid for.",
					int64(l.Memlock100-l.Memlock0)/100, kib(l.Memlock0), kib(l.Memlock1), kib(l.Memlock100), l.Anchors, l.Patterns, l.EntriesPerSession, byteSize(l.PayloadPerSession)),
				"memlock is the kernel's own accounting, read from /proc/self/fdinfo of every BPF map fd fsguard.Load left open in the test process (no bpftool); entries are counted by iterating the hash maps. On the VM's 6.1 kernel memlock is each map's footprint at its maximum size (since Linux 6.4 the kernel reports actual usage instead, which for preallocated maps is the same).",
				"Sessions are keyed by cgroup id; the 100 sessions use ids of groups never created (the maps do not check), each with the policy of the microbenchmark's 1-anchor session.",
				"The network maps (egress, cgroup programs) are in the host's memory figure: they load on the host kernel.")
			if l.RingUnaccounted > 0 {
				r.Notes = append(r.Notes, fmt.Sprintf("Ring buffer: %s of data pages allocated when the programs load, fixed, independent of sessions. This kernel reports memlock 0 for it (before Linux 6.4 ring buffers are left out of the footprint), so the totals above do not include them.", kib(l.RingUnaccounted)))
			}
		}
	}
	return order, done, sc.Err()
}

var vmTitles = map[string]string{
	vmMicroFigure:  "Filesystem microbenchmarks in the kernel-test VM: BPF-LSM (fsguard) with 1, 100, 10 000 anchors, Landlock, both",
	vmMacroFigure:  "Macro workload in the kernel-test VM: 20 000-file untar, git, cached go build; no session vs BPF-LSM session",
	vmMapMemFigure: "BPF-LSM (fsguard) map memory with 0, 1 and 100 sessions, in the kernel-test VM",
}

const tcgNote = "The VM is qemu under TCG (no KVM here): every instruction is emulated, so absolute times are meaningless and only the ratios, taken in the same boot, are reported as results."

func vmNotes(id string, n, hooks int) []string {
	switch id {
	case vmMacroFigure:
		return []string{
			fmt.Sprintf("Each step is the wall time of the real tool (GNU tar, git, go; the host's binaries over 9p) started by a worker process inside the session; session set-up excluded. The tree has %d files on the guest's tmpfs; %d BPF-LSM hooks attached (fsguard.Load).", n, hooks),
			tcgNote,
			"The session has two writable-root anchors, as an agent building Go needs (the workspace holding the tree; the directory holding the module and its GOCACHE), and the six protected-name patterns of a default session. It is checked to refuse a create outside its roots before measuring.",
			"`git init` runs outside the session, untimed: it writes .git/config and .git/hooks, which the session protects.",
			"go build: a cold build of the 20-package module takes minutes under TCG, so the harness writes the module and fills its GOCACHE on the host (bin/oxbench-vm, built with -trimpath so the cache keys do not name the directory), the guest copies both to its tmpfs (fsguard refuses writable roots on the overlay through which the guest sees the host), and the timed build in the VM is a fully cached one (the go command stats, hashes and opens every source and cache file, compiles nothing). It measures the hooks' cost on a cached build, not on compilation.",
			"One warm-up trial per variant on a 200-file tree first (binaries into the guest's page cache).",
		}
	case vmMicroFigure:
		return []string{
			fmt.Sprintf("Each value is one trial's time per operation: %d syscall sequences timed inside a worker process in the VM in batches of 500, the median batch taken; %d BPF-LSM hooks attached (fsguard.Load).", n, hooks),
			tcgNote,
			"Anchors are writable roots (workspace + sibling directories) keyed by (dev, inode); the six protected-name patterns of a default session are active in every BPF-LSM variant. Before measuring, each session is checked to refuse a create outside its roots (EACCES) and allow one inside.",
			"Landlock in the VM: the VM's 6.1 kernel has Landlock ABI 2. The worker applies to itself the ruleset landlock.Plan builds for a workspace-write session at ABI 3, minus the rights ABI 2 does not know (truncate, ioctl on devices). **`oxsupervise run` does not stack Landlock on such a kernel** (below ABI 7 Landlock's refusals are not audited, below ABI 3 truncate is not controlled), so the Landlock and BPF-LSM + Landlock rows measure the cost of the hooks stacked, not a configuration `run` picks on this kernel.",
		}
	}
	return nil
}

func kib(b uint64) string { return fmt.Sprintf("%.1f KiB", float64(b)/1024) }

func byteSize(b uint64) string {
	if b < 4096 {
		return fmt.Sprintf("%d bytes", b)
	}
	return kib(b)
}

// prepareVMGo writes the macro's 20-package module to dir/mod and builds
// it into dir/gocache with the environment the guest's build uses, so the
// guest's build finds every package cached.
func prepareVMGo(ctx context.Context, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	mod := filepath.Join(dir, "mod")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return err
	}
	if err := work.WriteModule(mod, 20); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(goroot(), "bin", "go"), "build", "./...")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), work.GoEnv(filepath.Join(dir, "gocache"), dir)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w: %s", err, out)
	}
	return nil
}
