//go:build linux

package bpfring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/pollset"
)

// idleWait is how the reader waits while the ring buffer is not mapped:
// on the ring map's descriptor, which polls readable while records are
// queued (the kernel's ringbuf_map_poll compares the producer and
// consumer positions), and on an eventfd for the wake-ups Drain and Close
// send. Mapping the ring (its data pages twice, for wrap-around: 8 MiB of
// page tables for the default 4 MiB) and unmapping it cost ~0.25 ms
// each; a session that is refused nothing, most of them, never needs
// either. The wait holds no thread (pollset).
type idleWait struct {
	set *pollset.Set
	// wake is the eventfd, as a file so that a wake-up after close (a
	// Drain racing Close) fails instead of writing to whatever reuses
	// the descriptor.
	wake   *os.File
	wakeFD int // valid while wake is open: the pollset's key
	mapFD  int
	ready  []int
}

func newIdleWait(mapFD int) (*idleWait, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd for the event ring buffer: %w", err)
	}
	set, err := pollset.New(mapFD, fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch the event ring buffer: %w", err)
	}
	return &idleWait{set: set, wake: os.NewFile(uintptr(fd), "event ring wake-up"), wakeFD: fd, mapFD: mapFD}, nil
}

// wait blocks until records are queued (queued true), a wake-up comes or
// timeout passes.
func (w *idleWait) wait(timeout time.Duration) (queued bool, err error) {
	if w.ready, err = w.set.Wait(time.Now().Add(timeout), w.ready); err != nil {
		return false, fmt.Errorf("wait for the event ring buffer: %w", err)
	}
	if slices.Contains(w.ready, w.wakeFD) {
		w.control(func(fd int) {
			var buf [8]byte
			unix.Read(fd, buf[:]) // resets the count; EAGAIN when another read took it
		})
	}
	return slices.Contains(w.ready, w.mapFD), nil
}

// queuedNow reports whether records are queued now. It asks the ring map
// itself (poll(2) calls its poll function, which compares the positions)
// and not the epoll set: the set hears of records only through the
// ring's wake-up, which the kernel sends from deferred work (irq_work)
// and may not have sent yet for a record already queued.
func (w *idleWait) queuedNow() (bool, error) {
	fds := []unix.PollFd{{Fd: int32(w.mapFD), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("look at the event ring buffer: %w", err)
		}
		return n > 0 && fds[0].Revents&unix.POLLIN != 0, nil
	}
}

// wakeUp makes a wait return (or the next one, when none is under way);
// after close it does nothing.
func (w *idleWait) wakeUp() {
	w.control(func(fd int) {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		unix.Write(fd, one[:])
	})
}

// control runs f on the eventfd's descriptor while it is open.
func (w *idleWait) control(f func(fd int)) {
	if rc, err := w.wake.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { f(int(fd)) })
	}
}

func (w *idleWait) close() error {
	return errors.Join(w.set.Close(), w.wake.Close())
}
