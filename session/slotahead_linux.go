//go:build linux

package session

import "github.com/openoxide/oxsupervise/internal/ahead"

// SlotAhead is the one slot of a supervisor that runs one session (a
// standalone `run`): made as soon as the process knows it runs a session
// of its own, in the background, while it resolves the policy and opens
// its host, and handed to Run through RunOptions.Slots. The group's mkdir
// and the launcher's fork, exec and runtime start (~1.5-2.5 ms) then run
// on the other core instead of in line after the bind. A slot that does
// not serve the session (its plan asks for a network namespace the slot
// lacks, say) is closed, and Run starts the normal way. Close ends a slot
// no session claimed. The signals the process gets while the slot waits
// are its session's (SlotOptions.KeepSignals).
type SlotAhead struct {
	slot *ahead.Value[*Slot]
}

// MakeSlotAhead starts making the slot of o in the background.
func MakeSlotAhead(o SlotOptions) *SlotAhead {
	o.KeepSignals = true
	return &SlotAhead{ahead.Start(func() (*Slot, error) { return NewSlot(o) }, (*Slot).Close)}
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
	if why := sl.Serves(opts, netns); why != "" {
		sl.Close()
		return nil, why
	}
	return sl, ""
}

// Close closes the slot unless a session claimed it (or Claim closed it):
// its launcher, which ran nothing, is killed and its group removed.
func (a *SlotAhead) Close() { a.slot.Close() }
