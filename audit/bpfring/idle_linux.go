//go:build linux

package bpfring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// idleWait is how the reader waits while the ring buffer is not mapped:
// an epoll set of the ring map's descriptor, which polls readable while
// records are queued (the kernel's ringbuf_map_poll compares the producer
// and consumer positions, level-triggered), and an eventfd for the
// wake-ups Drain and Close send. Mapping the ring (its data pages twice,
// for wrap-around: 8 MiB of page tables for the default 4 MiB) and
// unmapping it cost ~0.25 ms each; a session that is refused nothing,
// most of them, never needs either. The set is itself waited on in the Go
// runtime's poller (an epoll descriptor polls readable while its own set
// has events), so the wait holds no thread of its own.
type idleWait struct {
	set   *os.File // the epoll set, non-blocking, in the runtime's poller
	conn  syscall.RawConn
	wake  int
	mapFD int
}

func newIdleWait(mapFD int) (*idleWait, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll for the event ring buffer: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd for the event ring buffer: %w", err)
	}
	for _, fd := range []int{mapFD, wake} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			unix.Close(epfd)
			unix.Close(wake)
			return nil, fmt.Errorf("watch the event ring buffer: %w", err)
		}
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		unix.Close(wake)
		return nil, fmt.Errorf("watch the event ring buffer: %w", err)
	}
	w := &idleWait{set: os.NewFile(uintptr(epfd), "event ring wait"), wake: wake, mapFD: mapFD}
	if w.conn, err = w.set.SyscallConn(); err != nil {
		w.close()
		return nil, fmt.Errorf("watch the event ring buffer: %w", err)
	}
	return w, nil
}

// wait blocks until records are queued (queued true), a wake-up comes or
// timeout passes (<= 0: only looks).
func (w *idleWait) wait(timeout time.Duration) (queued bool, err error) {
	var deadline time.Time // none: a look must not meet an earlier wait's
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	if err := w.set.SetReadDeadline(deadline); err != nil {
		return false, fmt.Errorf("wait for the event ring buffer: %w", err)
	}
	var waitErr error
	var evs [2]unix.EpollEvent
	err = w.conn.Read(func(fd uintptr) bool {
		for {
			n, err := unix.EpollWait(int(fd), evs[:], 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				waitErr = err
				return true
			}
			if n == 0 {
				// Nothing yet: a look is done; a wait parks in the
				// poller until the set polls readable.
				return timeout <= 0
			}
			for _, ev := range evs[:n] {
				switch int(ev.Fd) {
				case w.mapFD:
					queued = true
				case w.wake:
					var buf [8]byte
					unix.Read(w.wake, buf[:]) // resets the count; EAGAIN when another read took it
				}
			}
			return true
		}
	})
	if err == nil {
		err = waitErr
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("wait for the event ring buffer: %w", err)
	}
	return queued, nil
}

// wakeUp makes a wait return (or the next one, when none is under way).
func (w *idleWait) wakeUp() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(w.wake, one[:])
}

func (w *idleWait) close() error {
	return errors.Join(w.set.Close(), unix.Close(w.wake))
}
