//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package treescan

import (
	"syscall"

	"golang.org/x/sys/unix"
)

func ctimeOf(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }

func ctimeOfUnix(st *unix.Stat_t) int64 { return st.Ctim.Nano() }

// rootOpenFlags open a scan's root for fstatat (no O_PATH here).
const rootOpenFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
