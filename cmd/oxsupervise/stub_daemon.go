package main

import (
	"context"
	"fmt"
)

// TODO(owner of verb_daemon.go): replace this stub.
func cmdDaemon(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise daemon: not implemented yet")
	return exitFail
}

// TODO(owner of verb_daemon.go): replace this stub.
func cmdApprovals(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise approvals: not implemented yet")
	return exitFail
}

// TODO(owner of verb_daemon.go): replace this stub.
func cmdApprove(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise approve: not implemented yet")
	return exitFail
}

// TODO(owner of verb_daemon.go): replace this stub.
func cmdExec(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise exec: not implemented yet")
	return exitFail
}
