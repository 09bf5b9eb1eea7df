//go:build !linux && !darwin && !windows

package main

import (
	"context"
	"fmt"
	"runtime"
)

// runCommand has no backend on this OS.
func runCommand(ctx context.Context, s streams, r runRequest) int {
	fmt.Fprintf(s.err, "oxsupervise run: boundary not built: no sandbox backend for %s; nothing ran\n", runtime.GOOS)
	return exitNoBoundary
}
