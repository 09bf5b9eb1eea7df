//go:build linux

package treescan

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func ctimeOf(st *syscall.Stat_t) int64 { return st.Ctim.Nano() }

func ctimeOfUnix(st *unix.Stat_t) int64 { return st.Ctim.Nano() }

// rootOpenFlags open a scan's root for fstatat only.
const rootOpenFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
