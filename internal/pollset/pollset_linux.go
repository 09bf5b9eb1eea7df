//go:build linux

// Package pollset waits until one of several descriptors is readable
// without holding a thread for the wait. A goroutine blocked in poll(2)
// or epoll_wait(2) keeps its OS thread in the system call, so the runtime
// starts another for the rest of the program; a supervisor with a handful
// of such waiters (the ring buffer's reader, the name watch) started and
// tore down a thread for each in every session (issue 18). A Set is an
// epoll set of the descriptors, and the set's own descriptor, which polls
// readable while the set has events, is waited on in the Go runtime's
// poller like a socket.
package pollset

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Set is an epoll set of descriptors registered level-triggered for
// reading: a descriptor that stays readable is reported by every Wait
// until it is read.
type Set struct {
	f    *os.File
	conn syscall.RawConn
}

// New makes a set of fds. The descriptors stay the caller's: Close
// releases only the set.
func New(fds ...int) (*Set, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll set: %w", err)
	}
	for _, fd := range fds {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			return nil, fmt.Errorf("epoll set: add descriptor %d: %w", fd, err)
		}
	}
	// Non-blocking, so that os.NewFile puts it in the runtime's poller.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll set: %w", err)
	}
	s := &Set{f: os.NewFile(uintptr(epfd), "epoll set")}
	if s.conn, err = s.f.SyscallConn(); err != nil {
		s.f.Close()
		return nil, fmt.Errorf("epoll set: %w", err)
	}
	return s, nil
}

// Wait blocks until a descriptor of the set is readable or deadline
// passes (the zero time: no deadline), and returns the readable ones in
// ready[:0] (none when the deadline passed).
func (s *Set) Wait(deadline time.Time, ready []int) ([]int, error) {
	if err := s.f.SetReadDeadline(deadline); err != nil {
		return nil, fmt.Errorf("epoll set: %w", err)
	}
	ready = ready[:0]
	var waitErr error
	var evs [8]unix.EpollEvent
	err := s.conn.Read(func(fd uintptr) bool {
		for {
			n, err := unix.EpollWait(int(fd), evs[:], 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				waitErr = err
				return true
			}
			for _, ev := range evs[:n] {
				ready = append(ready, int(ev.Fd))
			}
			// Nothing yet: park in the poller until the set polls
			// readable.
			return n > 0
		}
	})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ready[:0], nil
	}
	if err == nil {
		err = waitErr
	}
	if err != nil {
		return ready, fmt.Errorf("epoll set: %w", err)
	}
	return ready, nil
}

// Close releases the set (not its descriptors). A Wait under way returns
// an error.
func (s *Set) Close() error { return s.f.Close() }
