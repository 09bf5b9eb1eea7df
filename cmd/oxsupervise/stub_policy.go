package main

import (
	"context"
	"fmt"
)

// TODO(owner of verb_policy.go): replace this stub.
func cmdPolicy(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise policy: not implemented yet")
	return exitFail
}
