//go:build linux

package daemon

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// credential is a user the daemon acts for.
type credential struct {
	UID, GID int
	Groups   []int
}

// asUser runs fn on a dedicated OS thread whose filesystem identity is the
// user's (fsuid, fsgid, supplementary groups; the kernel drops the file
// capabilities of a thread whose fsuid is not 0), so that every file fn
// opens, stats or creates is subject to the user's own permissions: a user
// cannot make the daemon read or write, as root, a file they could not.
// The thread is never given back to the Go scheduler: it exits with the
// goroutine, so no other goroutine ever runs with the user's identity.
// fn must not start goroutines that touch the filesystem unless they take
// this thread's access first (internal/treescan's parallel lookups do).
func asUser(cred credential, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread dies with this goroutine.
		groups := cred.Groups
		if groups == nil {
			groups = []int{}
		}
		if err := unix.Setgroups(groups); err != nil {
			done <- fmt.Errorf("setgroups for uid %d: %w", cred.UID, err)
			return
		}
		unix.Setfsgid(cred.GID)
		unix.Setfsuid(cred.UID)
		if got, _ := unix.SetfsuidRetUid(-1); got != cred.UID {
			done <- fmt.Errorf("setfsuid(%d) did not take (fsuid is %d)", cred.UID, got)
			return
		}
		if got, _ := unix.SetfsgidRetGid(-1); got != cred.GID {
			done <- fmt.Errorf("setfsgid(%d) did not take (fsgid is %d)", cred.GID, got)
			return
		}
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("panic as uid %d: %v", cred.UID, r)
			}
		}()
		done <- fn()
	}()
	return <-done
}
