//go:build !linux

// Command oxbench measures oxsupervise's overhead; the measurements need
// Linux sessions, cgroups and BPF programs.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "oxbench: not supported on this OS (the benchmarks measure Linux sessions)")
	os.Exit(1)
}
