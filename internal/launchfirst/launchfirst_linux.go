//go:build linux

// Package launchfirst turns the binary importing it (oxsupervise, and the
// daemon program oxsupervised, whose sessions' launcher is itself) into
// the session launcher (session.LauncherMain) when it is started with
// session.LauncherVerb, as
// early in the program's initialization as Go allows: packages are
// initialized in import-path order as soon as their own imports are, so
// this one runs right after package session and what it imports, before
// the daemon's metrics, exporters and protocol packages (which the
// launcher never uses) are initialized. The launcher then builds the
// boundary and execs the command; it never reaches main.
package launchfirst

import (
	"os"

	"github.com/openoxide/oxsupervise/session"
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == session.LauncherVerb {
		os.Exit(session.LauncherMain())
	}
}
