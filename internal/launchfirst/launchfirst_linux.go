//go:build linux

// Package launchfirst turns the binary importing it (oxsupervise, and the
// daemon program oxsupervised) into the session launcher
// (launcher.Main) when it is started with launcher.Verb: how a supervisor
// with no launcher program installed beside it (session.launcherCommand)
// still starts its sessions. It acts as early in the program's
// initialization as Go allows: packages are initialized in import-path
// order as soon as their own imports are, and this one imports only
// package launcher (the standard library and x/sys), so it runs before
// most of the supervisor's packages are initialized (the daemon's
// metrics, exporters and protocol packages, which the launcher never
// uses). The launcher then builds the boundary and execs the command; it
// never reaches main.
package launchfirst

import (
	"os"

	"github.com/openoxide/oxsupervise/launcher"
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == launcher.Verb {
		os.Exit(launcher.Main())
	}
}
