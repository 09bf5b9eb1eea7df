//go:build linux

package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// errUringUnavailable means the kernel refused io_uring itself (disabled
// by sysctl or seccomp), so an io_uring connect cannot be judged here.
var errUringUnavailable = errors.New("io_uring unavailable")

// uringConnect connects a fresh TCP socket to target through a minimal
// io_uring (IORING_OP_CONNECT), the path that bypasses connect(2).
func uringConnect(target string) error {
	ap, err := netip.ParseAddrPort(target)
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("uring connect wants an IPv4 ip:port, got %q", target)
	}
	var params [120]byte
	ringFd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])), 0)
	if errno != 0 {
		return fmt.Errorf("%w: io_uring_setup: %v", errUringUnavailable, errno)
	}
	defer unix.Close(int(ringFd))
	le := binary.LittleEndian
	sqEntries := le.Uint32(params[0:])
	cqEntries := le.Uint32(params[4:])
	features := le.Uint32(params[20:])
	sqOff := params[40:80]
	cqOff := params[80:120]
	sqTail, sqMask, sqArray := le.Uint32(sqOff[4:]), le.Uint32(sqOff[8:]), le.Uint32(sqOff[24:])
	cqHead, cqTail, cqMask, cqCqes := le.Uint32(cqOff[0:]), le.Uint32(cqOff[4:]), le.Uint32(cqOff[8:]), le.Uint32(cqOff[20:])
	if features&1 == 0 { // IORING_FEAT_SINGLE_MMAP, every kernel since 5.4
		return fmt.Errorf("%w: no IORING_FEAT_SINGLE_MMAP", errUringUnavailable)
	}
	ringSize := max(int(sqArray+sqEntries*4), int(cqCqes+cqEntries*16))
	ring, err := unix.Mmap(int(ringFd), 0, ringSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap rings: %w", err)
	}
	defer unix.Munmap(ring)
	sqes, err := unix.Mmap(int(ringFd), 0x10000000, int(sqEntries)*64, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap sqes: %w", err)
	}
	defer unix.Munmap(sqes)
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(sock)
	sa := make([]byte, 16) // struct sockaddr_in
	le.PutUint16(sa[0:], unix.AF_INET)
	binary.BigEndian.PutUint16(sa[2:], ap.Port())
	a4 := ap.Addr().As4()
	copy(sa[4:], a4[:])

	tail := atomic.LoadUint32(u32(ring, sqTail))
	idx := tail & le.Uint32(ring[sqMask:])
	sqe := sqes[idx*64 : idx*64+64]
	clear(sqe)
	sqe[0] = 16 // IORING_OP_CONNECT
	le.PutUint32(sqe[4:], uint32(sock))
	le.PutUint64(sqe[8:], uint64(len(sa)))                          // off: addrlen
	le.PutUint64(sqe[16:], uint64(uintptr(unsafe.Pointer(&sa[0])))) // addr
	le.PutUint64(sqe[32:], 42)                                      // user_data
	*u32(ring, sqArray+4*idx) = idx
	atomic.StoreUint32(u32(ring, sqTail), tail+1)

	const enterGetEvents = 1
	_, _, errno = unix.Syscall6(unix.SYS_IO_URING_ENTER, ringFd, 1, 1, enterGetEvents, 0, 0)
	runtime.KeepAlive(sa)
	if errno != 0 {
		return fmt.Errorf("io_uring_enter: %w", errno)
	}
	head := atomic.LoadUint32(u32(ring, cqHead))
	if head == atomic.LoadUint32(u32(ring, cqTail)) {
		return errors.New("io_uring: no completion")
	}
	cqe := ring[cqCqes+(head&le.Uint32(ring[cqMask:]))*16:]
	res := int32(le.Uint32(cqe[8:]))
	atomic.StoreUint32(u32(ring, cqHead), head+1)
	if res < 0 {
		return syscall.Errno(-res)
	}
	return nil
}
