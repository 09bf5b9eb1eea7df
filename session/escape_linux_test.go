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

// TestRunPrivateShm: a session's /dev/shm is its own: the user's other
// programs' shared memory is not there, and what the session creates
// there (a multiprocessing semaphore, a file) never reaches the host.
func TestRunPrivateShm(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		t.Skipf("no /dev/shm directory here (%v)", err)
	}
	e := newEnv(t)
	host := filepath.Join("/dev/shm", "oxs-host-"+filepath.Base(e.base))
	mustWrite(t, host, "host secret\n")
	t.Cleanup(func() { os.Remove(host) })
	inside := filepath.Join("/dev/shm", "oxs-session-"+filepath.Base(e.base))
	t.Cleanup(func() { os.Remove(inside) })
	e.runOps(t, "workspace-write", []op{
		{"read-host-shm", "read " + host, []string{"ENOENT"}},
		{"write-own-shm", "write " + inside, ok},
	})
	if exists(inside) {
		t.Errorf("%s, created in the session, is on the host", inside)
	}
	if got := mustRead(t, host); got != "host secret\n" {
		t.Errorf("%s changed: %q", host, got)
	}
}
