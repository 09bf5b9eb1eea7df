//go:build linux

package bpfring

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	set   *pollset.Set
	wake  int
	mapFD int
	ready []int
}

func newIdleWait(mapFD int) (*idleWait, error) {
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd for the event ring buffer: %w", err)
	}
	set, err := pollset.New(mapFD, wake)
	if err != nil {
		unix.Close(wake)
		return nil, fmt.Errorf("watch the event ring buffer: %w", err)
	}
	return &idleWait{set: set, wake: wake, mapFD: mapFD}, nil
}

// wait blocks until records are queued (queued true), a wake-up comes or
// timeout passes (<= 0: only looks).
func (w *idleWait) wait(timeout time.Duration) (queued bool, err error) {
	if timeout > 0 {
		w.ready, err = w.set.Wait(time.Now().Add(timeout), w.ready)
	} else {
		w.ready, err = w.set.Look(w.ready)
	}
	if err != nil {
		return false, fmt.Errorf("wait for the event ring buffer: %w", err)
	}
	if slices.Contains(w.ready, w.wake) {
		var buf [8]byte
		unix.Read(w.wake, buf[:]) // resets the count; EAGAIN when another read took it
	}
	return slices.Contains(w.ready, w.mapFD), nil
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
