// Command oxsupervise-launch is the session launcher (package launcher):
// `oxsupervise run` starts it inside each session's cgroup and namespaces,
// where it builds the session's boundary and execs the command. It is
// internal, installed in PREFIX/libexec/oxsupervise/, and refuses to run
// unless started by the supervisor. A program of its own, linking only the
// standard library and golang.org/x/sys, so that a session's start does
// not pay the supervisor's start-up a second time.
package main

import (
	"os"

	"github.com/openoxide/oxsupervise/launcher"
)

func main() { os.Exit(launcher.Main()) }
