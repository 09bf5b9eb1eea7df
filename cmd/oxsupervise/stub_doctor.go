package main

import (
	"context"
	"fmt"
)

// TODO(owner of verb_doctor.go): replace this stub.
func cmdDoctor(ctx context.Context, s streams, args []string) int {
	fmt.Fprintln(s.err, "oxsupervise doctor: not implemented yet")
	return exitFail
}
