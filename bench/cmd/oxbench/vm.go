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
	"strings"
	"time"
)

// vmSuite boots the kernel-test VM (internal/vmtest) with the bench/fsvm
// benchmark and turns the samples it prints into a figure. Under TCG the
// guest is emulated, so only its ratios mean anything.
func vmSuite(ctx context.Context, e *env) ([]*report, error) {
	argv := []string{"go", "run", "./internal/vmtest/cmd/vmtest", "-v", "--self-check=false",
		"--run", "^TestFSGuardOverhead$", "--", "./bench/fsvm"}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = e.repo
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	runErr := cmd.Run()
	r := &report{ID: "fs-vm-bpflsm", Title: "Filesystem microbenchmarks in the kernel-test VM: BPF-LSM (fsguard) with 1, 100, 10 000 anchors, Landlock, both",
		Command: e.commandFor("vm"), Unit: "ns", Samples: map[string]map[string][]float64{}, Failed: map[string]string{}}
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := false
	var log []string
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		log = append(log, line)
		i := strings.Index(line, "OXBENCH-FSVM ")
		if i < 0 {
			continue
		}
		f := strings.SplitN(line[i+len("OXBENCH-FSVM "):], " ", 2)
		switch f[0] {
		case "header":
			var h struct {
				Variants []string `json:"variants"`
				Metrics  []string `json:"metrics"`
				Rounds   int      `json:"rounds"`
				N        int      `json:"n"`
				Hooks    int      `json:"hooks"`
			}
			if err := json.Unmarshal([]byte(f[1]), &h); err != nil {
				return []*report{r}, fmt.Errorf("vm header %q: %w", f[1], err)
			}
			r.Names, r.Metrics, r.Rounds = h.Variants, h.Metrics, h.Rounds
			for _, m := range h.Metrics {
				r.Samples[m] = map[string][]float64{}
			}
			r.Notes = append(r.Notes,
				fmt.Sprintf("Each value is one trial's time per operation: %d syscall sequences timed inside a worker process in the VM in batches of 500, the median batch taken; %d BPF-LSM hooks attached (fsguard.Load).", h.N, h.Hooks),
				"The VM is qemu under TCG (no KVM here): every instruction is emulated, so absolute times are meaningless and only the ratios, taken in the same boot, are reported as results.",
				"Anchors are writable roots (workspace + sibling directories) keyed by (dev, inode); the six protected-name patterns of a default session are active in every BPF-LSM variant. Before measuring, each session is checked to refuse a create outside its roots (EACCES) and allow one inside.",
				"Landlock in the VM is the ruleset landlock.Plan builds for a workspace-write session, applied by the worker to itself (the VM's 6.1 kernel has an older Landlock ABI than the host).")
		case "sample":
			var s struct {
				Variant string             `json:"variant"`
				Values  map[string]float64 `json:"values"`
			}
			if err := json.Unmarshal([]byte(f[1]), &s); err != nil {
				return []*report{r}, fmt.Errorf("vm sample %q: %w", f[1], err)
			}
			for m, v := range s.Values {
				if r.Samples[m] != nil {
					r.Samples[m][s.Variant] = append(r.Samples[m][s.Variant], v)
				}
			}
		case "failed":
			var fl struct{ Variant, Reason string }
			if err := json.Unmarshal([]byte(f[1]), &fl); err != nil {
				return []*report{r}, fmt.Errorf("vm failure line %q: %w", f[1], err)
			}
			r.Failed[fl.Variant] = fl.Reason
		case "done":
			done = true
		}
	}
	r.Took = time.Since(start).Round(time.Second).String()
	if runErr != nil || !done {
		tail := log
		if len(tail) > 15 {
			tail = tail[len(tail)-15:]
		}
		os.WriteFile(e.out+"/fs-vm-bpflsm.log", out.Bytes(), 0o644)
		return nil, fmt.Errorf("vm benchmark did not finish (%v); last console lines:\n%s", runErr, strings.Join(tail, "\n"))
	}
	return []*report{r}, nil
}
