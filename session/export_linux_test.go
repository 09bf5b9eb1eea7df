//go:build linux

package session

// SlotAheadID is the session ID of a's slot ("" when it could not be
// made), for the tests of what is left of it.
func SlotAheadID(a *SlotAhead) string {
	sl, err := a.slot.Peek()
	if err != nil {
		return ""
	}
	return sl.ID()
}
