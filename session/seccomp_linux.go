//go:build linux

package session

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// syscallID is one (audit arch, syscall number) through which ioctl(2) is
// reachable: a 64-bit kernel also serves the 32-bit (and x32) ABIs, and a
// filter that only knows the native number is bypassed by them.
type syscallID struct {
	arch uint32
	nr   uint32
}

// x32SyscallBit marks x32 syscall numbers on x86-64.
const x32SyscallBit = 0x40000000

func ioctlSyscalls() ([]syscallID, error) {
	switch runtime.GOARCH {
	case "amd64":
		return []syscallID{{unix.AUDIT_ARCH_X86_64, unix.SYS_IOCTL}, {unix.AUDIT_ARCH_X86_64, x32SyscallBit | 514}, {unix.AUDIT_ARCH_I386, 54}}, nil
	case "arm64":
		return []syscallID{{unix.AUDIT_ARCH_AARCH64, unix.SYS_IOCTL}, {unix.AUDIT_ARCH_ARM, 54}}, nil
	case "386":
		return []syscallID{{unix.AUDIT_ARCH_I386, unix.SYS_IOCTL}}, nil
	case "riscv64":
		return []syscallID{{unix.AUDIT_ARCH_RISCV64, unix.SYS_IOCTL}}, nil
	}
	return nil, fmt.Errorf("no ioctl syscall table for %s", runtime.GOARCH)
}

// tiocstiFilter is a seccomp program that fails ioctl(fd, TIOCSTI, ...)
// with EPERM and allows everything else. For each syscallID it checks
// arch, number, then the low 32 bits of the request argument (the kernel
// compares an unsigned int).
func tiocstiFilter(ids []syscallID) []unix.SockFilter {
	const (
		offNr   = 0
		offArch = 4
		offArg1 = 24 // seccomp_data.args[1]
		perID   = 6
	)
	arg1Low := uint32(offArg1)
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 { // big endian
		arg1Low += 4
	}
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: jt, Jf: jf, K: k}
	}
	deny := len(ids)*perID + 1
	var prog []unix.SockFilter
	for i, id := range ids {
		prog = append(prog,
			ld(offArch), jeq(id.arch, 0, 4),
			ld(offNr), jeq(id.nr, 0, 2),
			ld(arg1Low), jeq(unix.TIOCSTI, uint8(deny-(i*perID+5)-1), 0),
		)
	}
	return append(prog,
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	)
}

// denyTIOCSTI installs tiocstiFilter on the calling thread (no_new_privs
// must be set). The command shares the invoking shell's terminal, and
// TIOCSTI on it queues keystrokes that shell runs after the session ends,
// outside every layer; Landlock's ioctl right does not cover descriptors
// inherited across restrict_self, and dev.tty.legacy_tiocsti is still 1 on
// many kernels.
func denyTIOCSTI() error {
	ids, err := ioctlSyscalls()
	if err != nil {
		return fmt.Errorf("filter TIOCSTI: %w", err)
	}
	filter := tiocstiFilter(ids)
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("filter TIOCSTI: install seccomp filter: %w", errno)
	}
	runtime.KeepAlive(filter)
	return nil
}
