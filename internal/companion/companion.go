// Package companion finds the programs installed beside the oxsupervise
// binary — the session launcher and the daemon — and opens them, so that
// the file that was checked is the file that runs.
//
// Where a companion is looked for, in order (the one place this is
// decided):
//
//  1. the directory of the running executable (a build tree's bin/, or
//     wherever the binaries were copied together);
//  2. ../libexec/oxsupervise beside it, the installed layout of any prefix
//     (/usr/bin/oxsupervise → /usr/libexec/oxsupervise/, /usr/local/bin →
//     /usr/local/libexec/oxsupervise/).
//
// The first file found must pass the check (a regular, executable file
// owned by root or by the running executable's owner, writable by no one
// else); one that fails is an error, not a reason to look further, since
// a tampered companion must not be skipped over silently.
package companion

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The companions' file names.
const (
	// Launcher builds a session's boundary inside its cgroup and mount
	// namespace and execs the command (package launcher): a small
	// program, so that a session's start does not pay the start-up of
	// the whole supervisor a second time.
	Launcher = "oxsupervise-launch"
	// Daemon is the supervisor daemon (`oxsupervise daemon` executes it),
	// the only program linking the metrics and OpenTelemetry exporters.
	Daemon = "oxsupervised"
)

// Names are the companions, for what copies or installs them together
// with oxsupervise.
func Names() []string { return []string{Launcher, Daemon} }

// LibexecSubdir is where an installation keeps the companions, relative
// to the directory of the oxsupervise binary.
const LibexecSubdir = "../libexec/oxsupervise"

// ErrNotFound: no directory holds the companion.
var ErrNotFound = errors.New("companion program not found")

// Program is a checked companion. File is an O_PATH descriptor of the
// file that was checked; run it through ExecPath so that a file swapped
// in at Path afterwards is not the one executed.
type Program struct {
	Name string
	Path string
	File *os.File
}

// Close releases the descriptor.
func (p *Program) Close() error { return p.File.Close() }

// ExecPath is the path to execute the checked file by in a process where
// it is descriptor fd: the descriptor's own number in this process, or
// the number a child receives it as (os/exec's ExtraFiles[i] is 3+i).
func ExecPath(fd int) string { return fmt.Sprintf("/proc/self/fd/%d", fd) }

// Dirs lists the directories a companion of the executable exe is looked
// for in, in order.
func Dirs(exe string) []string {
	dir := filepath.Dir(exe)
	return []string{dir, filepath.Clean(filepath.Join(dir, LibexecSubdir))}
}
