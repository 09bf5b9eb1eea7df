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
