package main

import (
	"context"
	"fmt"
)

// TODO(owner of verb_audit.go): replace this stub.
func cmdAudit(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise audit: not implemented yet")
	return exitFail
}
