package main

import (
	"context"
	"fmt"
)

// TODO(owner of verb_run.go): replace this stub.
func cmdRun(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise run: not implemented yet")
	return exitFail
}

// TODO(owner of verb_run.go): replace this stub.
func cmdAttach(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise attach: not implemented yet")
	return exitFail
}

// TODO(owner of verb_run.go): replace this stub.
func cmdSessions(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise sessions: not implemented yet")
	return exitFail
}

// TODO(owner of verb_run.go): replace this stub.
func cmdStop(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise stop: not implemented yet")
	return exitFail
}
