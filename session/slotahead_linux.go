//go:build linux

package session

import (
	"sync"

	"github.com/openoxide/oxsupervise/internal/ahead"
)

// SlotAhead is the one slot of a supervisor that runs one session (a
// standalone `run`): made as soon as the process knows it runs a session
// of its own, in the background, while it resolves the policy and opens
// its host, and handed to Run through RunOptions.Slots. The group's mkdir
// and the launcher's fork, exec and runtime start (~1.5-2.5 ms) then run
// on the other core instead of in line after the bind. A slot that does
// not serve the session (its plan asks for a network namespace the slot
// lacks, say) is closed beside the normal start Run makes instead. Close
// ends a slot no session claimed. The signals the process gets while the
// slot waits are its session's (SlotOptions.KeepSignals).
type SlotAhead struct {
	slot *ahead.Value[*Slot]
	// closing is a slot that could not serve, closed beside the normal
	// start (Close waits for it).
	closing sync.WaitGroup
}

// MakeSlotAhead starts making the slot of o in the background.
func MakeSlotAhead(o SlotOptions) *SlotAhead {
	o.KeepSignals = true
	return &SlotAhead{slot: ahead.Start(func() (*Slot, error) { return NewSlot(o) }, (*Slot).Close)}
}

// Claim implements Slots: the slot once made, the first time only, when
// it serves the session; a slot that does not is closed.
func (a *SlotAhead) Claim(opts RunOptions, netns bool) (*Slot, string) {
	sl, err, ok := a.slot.Take()
	switch {
	case !ok:
		return nil, "the slot made ahead was taken"
	case err != nil:
		return nil, "the slot made ahead could not be made: " + err.Error()
	}
	if sl.termination() != nil {
		// The claim ends the run before anything of it runs, whether or
		// not the slot could serve it (its launcher may have died of the
		// same Ctrl-C): a normal start would lose the signal.
		return sl, ""
	}
	if why := sl.Serves(opts, netns); why != "" {
		// Killing its launcher and removing its group need not delay the
		// normal start.
		a.closing.Add(1)
		go func() {
			defer a.closing.Done()
			sl.Close()
		}()
		return nil, why
	}
	return sl, ""
}

// Close closes the slot unless a session claimed it (or Claim closed it):
// its launcher, which ran nothing, is killed and its group removed. It
// returns once a slot Claim closed is gone too.
func (a *SlotAhead) Close() {
	a.slot.Close()
	a.closing.Wait()
}
