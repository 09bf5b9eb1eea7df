// Package clidoc turns the command line's own --help output into the
// documentation a package ships: a man page per verb (roff) and shell
// completions for bash, zsh and fish.
//
// The help text is the one source: Read runs the built binary
// (`oxsupervise --help`, then `oxsupervise VERB --help` for every verb in
// its verb table, and `VERB SUB --help` for every subcommand a usage line
// names), and Parse reads pflag's flag listing from it. A verb or flag
// added to the CLI therefore appears in the man pages and completions at
// the next package build without anything here changing. The generator
// (internal/clidoc/cmd/clidoc) runs at `make deb` / `make install` time.
package clidoc
