//go:build unix && !linux

package treescan

import "os"

func fileUID() int { return os.Geteuid() }

// accessShared reports whether other threads access files as this one
// does (always, without per-thread file credentials).
func accessShared() bool { return true }
