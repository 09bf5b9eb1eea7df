//go:build linux

package session

// SlotAheadID is the session ID of a's slot ("" when it could not be
// made), for the tests of what is left of it.
func SlotAheadID(a *SlotAhead) string {
	<-a.made
	if a.sl == nil {
		return ""
	}
	return a.sl.ID()
}
