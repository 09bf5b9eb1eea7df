//go:build linux

// Command oxbench measures what oxsupervise costs on this machine: every
// figure runs its variants interleaved in one run (round r runs every
// variant once, in an order rotated by r) and reports medians, p90s and the
// ratio to the baseline with a paired bootstrap interval, because absolute
// times on a shared machine are noise. Results go to a Markdown table, a
// PNG chart and a JSON file of raw samples per figure.
//
// oxbench is also its own worker: "oxbench worker KIND ..." is the process
// that runs inside (or outside) a session and times its own work.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

// env is what every suite needs: where binaries and scratch space are.
type env struct {
	self       string // this binary (the worker)
	oxs        string // the oxsupervise binary under test
	repo       string // repository root (the vm suite builds from it)
	scratch    string // per-run scratch directory
	out        string // results directory
	quick      bool
	commandFor func(suite string) string
}

type suite struct {
	name string
	run  func(ctx context.Context, e *env) ([]*report, error)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(runWorker(os.Args[2:]))
	}
	if len(os.Args) == 3 && os.Args[1] == "replot" {
		if err := replot(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "oxbench replot:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(runMain(os.Args[1:]))
}

func runMain(args []string) int {
	fs := pflag.NewFlagSet("oxbench", pflag.ContinueOnError)
	out := fs.String("out", "bench/results", "directory for the Markdown tables, PNG charts and raw JSON")
	oxs := fs.String("oxsupervise", "", "oxsupervise binary to measure (required)")
	scratch := fs.String("scratch", "", "scratch directory (default: a new one under $TMPDIR)")
	quick := fs.Bool("quick", false, "fewer rounds and smaller workloads (a smoke run; numbers are noisier)")
	keep := fs.Bool("keep", false, "keep the scratch directory")
	repo := fs.String("repo", ".", "repository root, for the vm suite's `go run ./internal/vmtest/cmd/vmtest`")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: oxbench --oxsupervise BIN [--out DIR] [--quick] [SUITE...]\n       oxbench replot DIR   (redraw the PNGs from the JSON samples)\nsuites: %s (default: all)\n", strings.Join(suiteNames(), " "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		return 2
	}
	if *oxs == "" {
		fmt.Fprintln(os.Stderr, "oxbench: --oxsupervise BIN is required (build it and the programs it executes with: make build; BIN is bin/oxsupervise)")
		return 2
	}
	selected := fs.Args()
	if len(selected) == 0 {
		selected = suiteNames()
	}
	for _, s := range selected {
		if !slices.Contains(suiteNames(), s) {
			fmt.Fprintf(os.Stderr, "oxbench: unknown suite %q (have: %s)\n", s, strings.Join(suiteNames(), " "))
			return 2
		}
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "oxbench: must run as root (sessions, cgroups and BPF programs need it)")
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "oxbench: find own executable:", err)
		return 1
	}
	oxsAbs, err := filepath.Abs(*oxs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oxbench:", err)
		return 1
	}
	dir := *scratch
	if dir == "" {
		dir, err = os.MkdirTemp("", "oxbench-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "oxbench: scratch directory:", err)
			return 1
		}
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "oxbench: results directory:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{self: self, oxs: oxsAbs, repo: *repo, scratch: dir, out: *out, quick: *quick}
	e.commandFor = func(s string) string {
		q := ""
		if *quick {
			q = "--quick "
		}
		return fmt.Sprintf("OXBENCH_ARGS='%s%s' bench/run.sh", q, s)
	}
	start := time.Now()
	var all []*report
	failed := false
	for _, name := range selected {
		s := suiteByName(name)
		fmt.Fprintf(os.Stderr, "oxbench: suite %s ...\n", name)
		t0 := time.Now()
		reps, err := s.run(ctx, e)
		if err != nil {
			fmt.Fprintf(os.Stderr, "oxbench: suite %s FAILED: %v\n", name, err)
			failed = true
		}
		for _, r := range reps {
			r.RunAt = time.Now().UTC().Format(time.RFC3339)
			if err := r.write(e.out); err != nil {
				fmt.Fprintf(os.Stderr, "oxbench: write %s: %v\n", r.ID, err)
				failed = true
			}
			fmt.Println(r.markdown())
		}
		all = append(all, reps...)
		fmt.Fprintf(os.Stderr, "oxbench: suite %s took %s\n", name, time.Since(t0).Round(time.Second))
	}
	if err := writeIndex(e.out, all, time.Since(start)); err != nil {
		fmt.Fprintln(os.Stderr, "oxbench: write index:", err)
		failed = true
	}
	fmt.Fprintf(os.Stderr, "oxbench: done in %s; results in %s\n", time.Since(start).Round(time.Second), e.out)
	if failed {
		return 1
	}
	return 0
}

func suites() []suite {
	return []suite{
		{"session", sessionSuite},
		{"fs", fsMicroSuite},
		{"macro", macroSuite},
		{"net", netSuite},
		{"audit", auditSuite},
		{"memory", memorySuite},
		{"vm", vmSuite},
	}
}

func suiteNames() []string {
	var n []string
	for _, s := range suites() {
		n = append(n, s.name)
	}
	return n
}

func suiteByName(name string) suite {
	for _, s := range suites() {
		if s.name == name {
			return s
		}
	}
	panic("unknown suite " + name)
}
