package windows

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
)

// sessionIDPattern is what a session id must look like to name a SID,
// a journal file and audit records.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// SessionSID derives the session's restricting SID from its id.
//
// Form: S-1-5-21-A-B-C-D, the shape of a domain account SID, with A..D the
// first 128 bits of SHA-256("oxsupervise session sid v1\x00" || id). This
// shape is the one other write-restricted sandboxes already use as a
// restricting SID in file ACEs (a capability SID S-1-15-3-... is meant for
// AppContainer tokens, where the kernel matches it against the token's
// capability list rather than its restricting SIDs). 128 hashed bits make
// a collision with a real domain's SID or another session's negligible.
// Deriving it (rather than drawing it at random) lets crash recovery
// recompute the SID from the session id in a journal even if the journal's
// SID field was lost. Knowing the SID gives a sandboxed process nothing: a
// process cannot add SIDs to its own token.
func SessionSID(sessionID string) (string, error) {
	if !sessionIDPattern.MatchString(sessionID) {
		return "", fmt.Errorf("session id %q must match %s", sessionID, sessionIDPattern)
	}
	sum := sha256.Sum256([]byte("oxsupervise session sid v1\x00" + sessionID))
	return fmt.Sprintf("S-1-5-21-%d-%d-%d-%d",
		binary.LittleEndian.Uint32(sum[0:4]), binary.LittleEndian.Uint32(sum[4:8]),
		binary.LittleEndian.Uint32(sum[8:12]), binary.LittleEndian.Uint32(sum[12:16])), nil
}

// Well-known SIDs the token plan names.
const (
	SIDAdministrators = "S-1-5-32-544"
	SIDEveryone       = "S-1-1-0"
)
