package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

func cmdVersion(ctx context.Context, s streams, args []string) int {
	rev := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range info.Settings {
			if kv.Key == "vcs.revision" {
				rev = " " + kv.Value
			}
		}
	}
	fmt.Fprintf(s.out, "oxsupervise %s%s\n", version, rev)
	return exitOK
}
