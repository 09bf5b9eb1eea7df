package testutil

import (
	"sync"
	"time"
)

// LingerClock stands in for time.AfterFunc where a test drives a linger
// (the read-only view's, session.ROViewConfig.AfterFunc): the functions
// it is given run only when the test ends their linger (End), never on a
// timer, so no test waits for one.
type LingerClock struct {
	mu        sync.Mutex
	scheduled []*Linger
}

// Linger is one AfterFunc call: D is the delay asked for.
type Linger struct {
	D              time.Duration
	f              func()
	cancelled, ran bool
}

// AfterFunc records f for End; the function it returns cancels it (and
// reports true, as a timer stopped in time does).
func (c *LingerClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := &Linger{D: d, f: f}
	c.scheduled = append(c.scheduled, l)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		l.cancelled = true
		return true
	}
}

// End ends l as its timer would, cancelled or not: a timer can fire
// after its cancel was asked for, which the code under test must allow.
func (c *LingerClock) End(l *Linger) {
	c.mu.Lock()
	l.ran = true
	c.mu.Unlock()
	l.f()
}

// All is every linger scheduled.
func (c *LingerClock) All() []*Linger {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Linger(nil), c.scheduled...)
}

// Pending is the lingers scheduled, neither cancelled nor ended.
func (c *LingerClock) Pending() []*Linger {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Linger
	for _, l := range c.scheduled {
		if !l.cancelled && !l.ran {
			out = append(out, l)
		}
	}
	return out
}
