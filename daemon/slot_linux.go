//go:build linux

package daemon

import (
	"sync"

	"github.com/rs/zerolog"

	"github.com/openoxide/oxsupervise/session"
)

// slotPool keeps one session slot (session.Slot) ready ahead of the next
// run request: its group created, its session ID chosen, its launcher
// started into it and waiting for its spec, so that a request does not
// wait for the group's creation and the launcher's start. A claimed slot
// is the claiming session's alone. The next one is made once that
// session has ended (ended), off the request path and without taking the
// CPU from the session's start or end (on a small machine the fork and
// exec of the next launcher slowed what it overlapped), or at once when a
// request comes before that; it is made for what the last request needed
// (a private network namespace or not). A request the slot cannot serve
// starts the normal way, and its timing says why. close removes the slot
// waiting.
type slotPool struct {
	warn zerolog.Logger

	mu   sync.Mutex
	opts session.SlotOptions // what the next slot is made for
	// ready is the slot waiting for a request; filling is non-nil while
	// the next one is on its way, closed when it is done (lastErr when it
	// failed); hurry, while the fill still waits for the end of the
	// session that claimed the last slot (after), starts it at once when
	// closed.
	ready   *session.Slot
	filling chan struct{}
	hurry   chan struct{}
	after   string
	lastErr error
	closed  bool
	fills   sync.WaitGroup
}

// newSlotPool starts making the first slot of opts.
func newSlotPool(opts session.SlotOptions, warn zerolog.Logger) *slotPool {
	p := &slotPool{opts: opts, warn: warn}
	p.mu.Lock()
	p.fillLocked(nil, false)
	p.mu.Unlock()
	return p
}

// Claim implements session.Slots. A slot on its way is waited for (made
// at once if it still waited for the session before): it is further on
// than a normal start would be.
func (p *slotPool) Claim(opts session.RunOptions, netns bool) (*session.Slot, string) {
	if p == nil {
		return nil, "the daemon keeps no slot"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.awaitFillLocked(true)
	if p.closed {
		return nil, "the daemon is stopping"
	}
	sl := p.ready
	p.ready = nil
	if sl == nil {
		why := "no slot ready"
		if p.lastErr != nil {
			why = "the slot could not be made: " + p.lastErr.Error()
		}
		p.opts.NetNS = netns
		p.fillLocked(nil, false)
		return nil, why
	}
	if why := sl.Serves(opts, netns); why != "" {
		// The next slot is made for what was asked last.
		p.opts.NetNS = netns
		p.fillLocked(sl, false)
		return nil, why
	}
	p.after = sl.ID()
	p.fillLocked(nil, true)
	return sl, ""
}

// awaitFillLocked waits for the slot on its way, if any, to be made (or
// to fail), starting it at once with hurry when it still waits for the
// session before; p.mu is held, and released while it waits.
func (p *slotPool) awaitFillLocked(hurry bool) {
	for p.filling != nil {
		if hurry && p.hurry != nil {
			close(p.hurry)
			p.hurry = nil
		}
		filling := p.filling
		p.mu.Unlock()
		<-filling
		p.mu.Lock()
	}
}

// ended tells the pool that session id has ended: when it claimed the
// last slot, the next one is made now.
func (p *slotPool) ended(id string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hurry != nil && p.after == id {
		close(p.hurry)
		p.hurry = nil
	}
}

// fillLocked makes the next slot in the background (with wait: once
// p.after has ended or a Claim or close hurries it), after closing old (a
// slot that could not serve) there; p.mu is held.
func (p *slotPool) fillLocked(old *session.Slot, wait bool) {
	done := make(chan struct{})
	p.filling = done
	var hurry chan struct{}
	if wait {
		hurry = make(chan struct{})
		p.hurry = hurry
	}
	opts := p.opts
	p.fills.Add(1)
	go func() {
		defer p.fills.Done()
		if wait {
			<-hurry
		}
		if old != nil {
			old.Close()
		}
		var sl *session.Slot
		var err error
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if !closed {
			if sl, err = session.NewSlot(opts); err != nil {
				p.warn.Warn().Err(err).Msg("session slot not made; the next run request starts its session the normal way")
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed && sl != nil {
			sl.Close()
			sl = nil
		}
		p.ready, p.lastErr, p.filling = sl, err, nil
		close(done)
	}()
}

// close removes the slot waiting (its launcher killed, its group removed)
// once the one on its way, if any, is done; no slot is made or handed out
// afterwards.
func (p *slotPool) close() {
	p.mu.Lock()
	p.closed = true
	if p.hurry != nil {
		close(p.hurry)
		p.hurry = nil
	}
	p.mu.Unlock()
	p.fills.Wait()
	p.mu.Lock()
	sl := p.ready
	p.ready = nil
	p.mu.Unlock()
	if sl != nil {
		sl.Close()
	}
}
