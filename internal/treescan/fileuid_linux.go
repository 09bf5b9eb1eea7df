//go:build linux

package treescan

import (
	"runtime"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/capset"
)

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

// threadAccess is what the kernel checks a thread's file access against:
// its filesystem uid and gid, supplementary groups and effective
// capabilities (setfsuid away from 0 drops the file capabilities).
type threadAccess struct {
	uid, gid int
	groups   []int
	caps     uint64
}

// currentAccess is the calling thread's file access; ok is false when it
// cannot be read in full.
func currentAccess() (a threadAccess, ok bool) {
	a.uid = fileUID()
	a.gid, _ = unix.SetfsgidRetGid(-1)
	groups, err := unix.Getgroups() // the calling thread's own
	if err != nil {
		return a, false
	}
	slices.Sort(groups)
	a.groups = groups
	caps, err := capset.Effective()
	if err != nil {
		return a, false
	}
	a.caps = caps
	return a, true
}

// adopt gives the calling goroutine a thread of its own with a's file
// access and reports whether it has exactly that access now. The thread
// is never given back to the scheduler: it exits with the goroutine, so
// no other goroutine runs with a's access, and one whose access could not
// be made a's does nothing with it.
func (a threadAccess) adopt() bool {
	runtime.LockOSThread() // not unlocked: the thread dies with the goroutine
	if err := unix.Setgroups(a.groups); err != nil {
		return false
	}
	unix.Setfsgid(a.gid)
	unix.Setfsuid(a.uid)
	now, ok := currentAccess()
	return ok && now.uid == a.uid && now.gid == a.gid && slices.Equal(now.groups, a.groups) && now.caps == a.caps
}
