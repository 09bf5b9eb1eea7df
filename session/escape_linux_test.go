//go:build linux

package session_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunMetadataOutsideRoots performs the metadata changes Landlock has
// no right for (chmod, chown, utimes) on a file outside the writable
// roots (the session runs as root): the read-only view refuses each
// with EROFS and the file keeps its mode, owner and times. The same
// changes on a file in the workspace succeed.
func TestRunMetadataOutsideRoots(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	victim := filepath.Join(e.outside, "victim.txt")
	var before unix.Stat_t
	if err := unix.Stat(victim, &before); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(e.ws, "own.txt"), "own\n")
	ops := []op{
		{"chmod-outside", "chmod " + victim, readOnly},
		{"chown-outside", "chown " + victim, readOnly},
		{"utimes-outside", "utimes " + victim, readOnly},
		{"chmod-etc", "chmod /etc/hostname", readOnly},
		{"chmod-ws", "chmod own.txt", ok},
		{"utimes-ws", "utimes own.txt", ok},
	}
	e.runOps(t, "workspace-write", ops)
	var after unix.Stat_t
	if err := unix.Stat(victim, &after); err != nil {
		t.Fatal(err)
	}
	if after.Mode != before.Mode || after.Uid != before.Uid || after.Gid != before.Gid || after.Mtim != before.Mtim {
		t.Errorf("%s changed: mode %o uid %d gid %d mtime %v; was %o %d %d %v",
			victim, after.Mode, after.Uid, after.Gid, after.Mtim, before.Mode, before.Uid, before.Gid, before.Mtim)
	}
	fi, err := os.Stat(filepath.Join(e.ws, "own.txt"))
	if err != nil || fi.Mode().Perm() != 0o777 || fi.ModTime().Unix() != 1 {
		t.Errorf("own.txt after chmod/utimes in the session: %v, %v; want mode 0777, mtime 1", fi, err)
	}
}
