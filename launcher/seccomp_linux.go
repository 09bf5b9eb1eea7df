//go:build linux

package launcher

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The session's seccomp filter refuses what no other layer can judge:
//   - ioctl(fd, TIOCSTI, ...) with EPERM. The command shares the invoking
//     shell's terminal, and TIOCSTI on it queues keystrokes that shell runs
//     after the session ends, outside every layer; Landlock's ioctl right
//     does not cover descriptors inherited across restrict_self, and
//     dev.tty.legacy_tiocsti is still 1 on many kernels.
//   - io_uring_setup, io_uring_enter and io_uring_register with ENOSYS, as
//     on a kernel without io_uring (callers such as libuv fall back to
//     plain syscalls): io_uring operations do not pass seccomp, and
//     openat, connect or socket through a ring would pass this filter.
//   - unless network is "full" or BPF-LSM's socket_create program
//     judges sockets (it refuses the same families, audited with the
//     family), socket(2) in a family other than AF_UNIX,
//     AF_INET, AF_INET6 and AF_NETLINK with EAFNOSUPPORT (as a kernel
//     without that family answers), and raw or packet-type sockets of
//     AF_INET and AF_INET6 with EPERM (as without CAP_NET_RAW): the
//     cgroup network programs see TCP and UDP of inet sockets only, and
//     the frames of an AF_PACKET or raw socket pass them by;
//     socketpair(2) outside AF_UNIX likewise. The 32-bit x86 socketcall(2)
//     multiplexer hides its arguments from seccomp, so its SYS_SOCKET and
//     SYS_SOCKETPAIR calls get ENOSYS: 32-bit programs must use the direct
//     socket syscalls (Linux 4.3), which the filter judges.
//   - clone3 with ENOSYS, as on a kernel before Linux 5.3 (and as Docker's
//     default profile answers): clone3's CLONE_INTO_CGROUP starts the
//     child in the cgroup of a directory descriptor, and the kernel only
//     checks write permission on the common ancestor's cgroup.procs,
//     which a uid 0 session passes without any capability (opening the
//     cgroup2 root O_PATH is neither a Landlock access nor a write to the
//     read-only mount): the child would leave the session's group, its
//     network programs, limits and cgroup.kill. seccomp cannot read the
//     flags in clone3's struct clone_args, so the whole syscall goes:
//     glibc (pthread_create, posix_spawn) and Rust's std fall back to
//     clone(2) on ENOSYS, whose flags cannot hold CLONE_INTO_CGROUP; Go
//     and musl use clone(2) anyway (Go clone3 only for
//     SysProcAttr.UseCgroupFD). Every other way into another cgroup is a
//     write to cgroup.procs or cgroup.threads, which the read-only view,
//     Landlock or BPF-LSM refuse.
//
// The filter is installed with SECCOMP_FILTER_FLAG_LOG: the kernel audits
// every refusal as an AUDIT_SECCOMP record (when kernel.seccomp
// .actions_logged includes errno, its default), which kernelaudit turns
// into an audit record of layer seccomp. Except clone3's: glibc tries
// clone3 first on every thread creation and spawn, so each would leave a
// record of something the program never asked for, and the log would be
// flooded with them. clone3 is refused by a filter of its own, installed
// without the log flag: the kernel runs every filter, newest first, keeps
// as the match the first that returned the most restrictive action, and
// audits the refusal only when that filter has the log flag
// (kernel/seccomp.c: seccomp_run_filters, __seccomp_filter). The session
// filter allows clone3, so the unlogged filter's ENOSYS is the only
// refusal of it, and no other refusal is the unlogged filter's.

// Errnos of the filter's refusals.
const (
	errnoTIOCSTI = unix.EPERM
	errnoIOUring = unix.ENOSYS
	errnoFamily  = unix.EAFNOSUPPORT
	errnoRaw     = unix.EPERM
	errnoSockMux = unix.ENOSYS
	errnoClone3  = unix.ENOSYS
)

// x32SyscallBit marks x32 syscall numbers on x86-64.
const x32SyscallBit = 0x40000000

// archSyscalls are the numbers of the filtered syscalls in one ABI: a
// 64-bit kernel also serves the 32-bit (and x32) ABIs, and a filter that
// only knows the native numbers is bypassed by them.
type archSyscalls struct {
	arch                      uint32
	ioctl, ioURing            []uint32
	socket, socketpair, muxed []uint32
	// clone3 is refused by the unlogged clone3Filter (435 in every ABI
	// here: the syscall tables are unified from 403 on).
	clone3 []uint32
}

func ioURingNrs(bit uint32) []uint32 { return []uint32{bit | 425, bit | 426, bit | 427} }

func filteredSyscalls() ([]archSyscalls, error) {
	switch runtime.GOARCH {
	case "amd64":
		return []archSyscalls{
			{arch: unix.AUDIT_ARCH_X86_64,
				ioctl:   []uint32{unix.SYS_IOCTL, x32SyscallBit | 514},
				ioURing: append(ioURingNrs(0), ioURingNrs(x32SyscallBit)...),
				socket:  []uint32{unix.SYS_SOCKET, x32SyscallBit | unix.SYS_SOCKET}, socketpair: []uint32{unix.SYS_SOCKETPAIR, x32SyscallBit | unix.SYS_SOCKETPAIR},
				clone3: []uint32{unix.SYS_CLONE3, x32SyscallBit | unix.SYS_CLONE3}},
			{arch: unix.AUDIT_ARCH_I386, ioctl: []uint32{54}, ioURing: ioURingNrs(0), socket: []uint32{359}, socketpair: []uint32{360}, muxed: []uint32{102}, clone3: []uint32{435}},
		}, nil
	case "arm64":
		return []archSyscalls{
			{arch: unix.AUDIT_ARCH_AARCH64, ioctl: []uint32{unix.SYS_IOCTL}, ioURing: ioURingNrs(0), socket: []uint32{unix.SYS_SOCKET}, socketpair: []uint32{unix.SYS_SOCKETPAIR}, clone3: []uint32{unix.SYS_CLONE3}},
			{arch: unix.AUDIT_ARCH_ARM, ioctl: []uint32{54}, ioURing: ioURingNrs(0), socket: []uint32{281}, socketpair: []uint32{288}, clone3: []uint32{435}},
		}, nil
	case "386":
		return []archSyscalls{{arch: unix.AUDIT_ARCH_I386, ioctl: []uint32{54}, ioURing: ioURingNrs(0), socket: []uint32{359}, socketpair: []uint32{360}, muxed: []uint32{102}, clone3: []uint32{435}}}, nil
	case "riscv64":
		return []archSyscalls{{arch: unix.AUDIT_ARCH_RISCV64, ioctl: []uint32{unix.SYS_IOCTL}, ioURing: ioURingNrs(0), socket: []uint32{unix.SYS_SOCKET}, socketpair: []uint32{unix.SYS_SOCKETPAIR}, clone3: []uint32{unix.SYS_CLONE3}}}, nil
	}
	return nil, fmt.Errorf("no syscall table for %s", runtime.GOARCH)
}

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
)

// argLow is the offset of the low 32 bits of argument i: the kernel
// compares an int (family, type) or unsigned int (ioctl request).
func argLow(i uint32) uint32 {
	off := offArg0 + 8*i
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 { // big endian
		off += 4
	}
	return off
}

// sessionFilter is the session's seccomp program; restrictSockets adds
// the socket rules (network is not "full").
func sessionFilter(tables []archSyscalls, restrictSockets bool) ([]unix.SockFilter, error) {
	a := newBPFAsm()
	ret := func(errno unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(errno) }
	for i, t := range tables {
		next := fmt.Sprintf("arch%d", i+1)
		a.ld(offArch)
		a.jeq(t.arch, "", next)
		a.ld(offNr)
		for _, nr := range t.ioctl {
			a.jeq(nr, fmt.Sprintf("ioctl%d", i), "")
		}
		for _, nr := range t.ioURing {
			a.jeq(nr, "ret-iouring", "")
		}
		if restrictSockets {
			for _, nr := range t.socket {
				a.jeq(nr, fmt.Sprintf("socket%d", i), "")
			}
			for _, nr := range t.socketpair {
				a.jeq(nr, fmt.Sprintf("socketpair%d", i), "")
			}
			for _, nr := range t.muxed {
				a.jeq(nr, fmt.Sprintf("muxed%d", i), "")
			}
		}
		a.ret(unix.SECCOMP_RET_ALLOW)

		a.label(fmt.Sprintf("ioctl%d", i))
		a.ld(argLow(1))
		a.jeq(unix.TIOCSTI, "ret-tiocsti", "ret-allow")
		if restrictSockets {
			a.label(fmt.Sprintf("socket%d", i))
			a.ld(argLow(0))
			a.jeq(unix.AF_UNIX, "ret-allow", "")
			a.jeq(unix.AF_NETLINK, "ret-allow", "")
			a.jeq(unix.AF_INET, "inet-type", "")
			a.jeq(unix.AF_INET6, "inet-type", "ret-family")
			a.label(fmt.Sprintf("socketpair%d", i))
			a.ld(argLow(0))
			a.jeq(unix.AF_UNIX, "ret-allow", "ret-family")
			if len(t.muxed) > 0 {
				a.label(fmt.Sprintf("muxed%d", i))
				a.ld(argLow(0))
				a.jeq(1, "ret-sockmux", "")          // SYS_SOCKET
				a.jeq(8, "ret-sockmux", "ret-allow") // SYS_SOCKETPAIR
			}
		}
		a.label(next)
	}
	a.ret(unix.SECCOMP_RET_ALLOW) // no other ABI reaches this kernel's syscalls
	if restrictSockets {
		a.label("inet-type")
		a.ld(argLow(1))
		a.and(0xf) // the type without SOCK_NONBLOCK and SOCK_CLOEXEC
		a.jeq(unix.SOCK_RAW, "ret-raw", "")
		a.jeq(unix.SOCK_PACKET, "ret-raw", "ret-allow")
		a.label("ret-family")
		a.ret(ret(errnoFamily))
		a.label("ret-raw")
		a.ret(ret(errnoRaw))
		a.label("ret-sockmux")
		a.ret(ret(errnoSockMux))
	}
	a.label("ret-tiocsti")
	a.ret(ret(errnoTIOCSTI))
	a.label("ret-iouring")
	a.ret(ret(errnoIOUring))
	a.label("ret-allow")
	a.ret(unix.SECCOMP_RET_ALLOW)
	return a.assemble()
}

// clone3Filter is the program that refuses clone3, installed without the
// log flag (see the top of this file for why it is a filter of its own).
func clone3Filter(tables []archSyscalls) ([]unix.SockFilter, error) {
	a := newBPFAsm()
	for i, t := range tables {
		next := fmt.Sprintf("arch%d", i+1)
		a.ld(offArch)
		a.jeq(t.arch, "", next)
		a.ld(offNr)
		for _, nr := range t.clone3 {
			a.jeq(nr, "ret-clone3", "")
		}
		a.ret(unix.SECCOMP_RET_ALLOW)
		a.label(next)
	}
	a.ret(unix.SECCOMP_RET_ALLOW)
	a.label("ret-clone3")
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(errnoClone3))
	return a.assemble()
}

// installSessionFilter installs sessionFilter on the calling thread
// (no_new_privs must be set), asking the kernel to audit its refusals,
// then clone3Filter, whose refusal is not audited. While sessionFilter
// allows clone3 the order does not matter; clone3Filter still comes last,
// so that were both to refuse clone3, the newest, unlogged one would be
// the match the kernel logs by (filters run newest first, and the first
// to return the winning action is kept).
func installSessionFilter(restrictSockets bool) error {
	tables, err := filteredSyscalls()
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	filter, err := sessionFilter(tables, restrictSockets)
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	clone3, err := clone3Filter(tables)
	if err != nil {
		return fmt.Errorf("seccomp: clone3 filter: %w", err)
	}
	errno := installFilter(filter, unix.SECCOMP_FILTER_FLAG_LOG)
	if errno == unix.EINVAL {
		// Before Linux 4.14 there is no SECCOMP_FILTER_FLAG_LOG: the
		// filter still refuses, the refusals are not audited.
		errno = installFilter(filter, 0)
	}
	if errno != 0 {
		return fmt.Errorf("seccomp: install the session filter: %w", errno)
	}
	if errno := installFilter(clone3, 0); errno != 0 {
		return fmt.Errorf("seccomp: install the clone3 filter: %w", errno)
	}
	return nil
}

func installFilter(filter []unix.SockFilter, flags uintptr) unix.Errno {
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	return errno
}
