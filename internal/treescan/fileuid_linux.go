//go:build linux

package treescan

import "golang.org/x/sys/unix"

// fileUID is the uid file access is checked against: the filesystem uid,
// which a daemon scanning with a user's access (setfsuid on its thread)
// has set while its effective uid stays root. setfsuid(-1) changes
// nothing and returns the current value.
func fileUID() int {
	uid, _ := unix.SetfsuidRetUid(-1)
	return uid
}

// accessShared reports whether other threads access files as this one
// does: its filesystem uid and gid are the process's effective ones. A
// daemon scanning with a user's access has set them on its own thread
// only, and work spread to other threads would run with the daemon's.
func accessShared() bool {
	gid, _ := unix.SetfsgidRetGid(-1)
	return fileUID() == unix.Geteuid() && gid == unix.Getegid()
}
