//go:build unix && !linux

package treescan

import "os"

func fileUID() int { return os.Geteuid() }

// accessShared reports whether other threads access files as this one
// does (always, without per-thread file credentials).
func accessShared() bool { return true }

// threadAccess is a thread's own file access, which this OS does not
// have (accessShared).
type threadAccess struct{}

func currentAccess() (threadAccess, bool) { return threadAccess{}, false }

func (threadAccess) adopt() bool { return false }
