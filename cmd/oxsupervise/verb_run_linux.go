//go:build linux

package main

import (
	"os"

	"github.com/openoxide/oxsupervise/session"
)

// The launcher is this binary re-executed by `run` with a hidden verb. It
// is intercepted before main so it never reaches the verb table, help or
// signal handling, and does nothing but build the boundary and exec.
func init() {
	if len(os.Args) > 1 && os.Args[1] == session.LauncherVerb {
		os.Exit(session.LauncherMain())
	}
}
