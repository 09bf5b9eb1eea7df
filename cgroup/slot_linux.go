//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// slotMode marks a group made ahead of its session (a daemon's slot, or a
// standalone run's, made at its start): its directory has the sticky bit,
// which cgroupfs gives no other meaning. The mkdir itself sets it (no
// umask clears it), so no listing ever sees a slot unmarked: a mark added
// after the mkdir (slotXattr, as earlier versions did) left a moment in
// which ListSessions listed a slot as a session. ListSessions leaves a
// slot out until MarkClaimed clears the bit.
const slotMode = os.ModeSticky

// slotXattr is how slots were marked before slotMode: a daemon's start
// still finds and removes such a slot that a crashed daemon of an earlier
// version left (ListSlots), and no listing takes it for a session.
const slotXattr = "trusted.oxsupervise.slot"

// NewSlot is NewSession, without limits, for a group made ahead of its
// session: it is marked as a slot from its creation on, and ListSessions
// leaves it out until MarkClaimed (then SetLimits gives it its session's
// limits).
func NewSlot(cfg Config, id string) (*Group, error) {
	return createGroup(cfg, id, Limits{}, 0o755|slotMode)
}

// MarkClaimed makes a slot's group a session's: ListSessions lists it.
func (g *Group) MarkClaimed() error {
	fi, err := os.Stat(g.Path)
	if err != nil {
		return fmt.Errorf("claim session slot %s: %w", g.ID, err)
	}
	if err := os.Chmod(g.Path, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("claim session slot %s: %w", g.ID, err)
	}
	return nil
}

// groupKind is what a listing found under the sessions' parent.
type groupKind int

const (
	kindSession groupKind = iota
	kindSlot              // made ahead of its session, not claimed yet
	kindGone              // removed between the listing's readdir and its look at the group
)

// kindOf tells what the group at dir is. A group that cannot be looked at
// any more is gone, not a session: a listing's readdir sees a group that
// is removed right after it (a slot a daemon discards, a session's end),
// and listing it would name a session that no longer exists.
func kindOf(dir string) groupKind {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return kindGone
	case err != nil:
		// Not known to be a slot: listed, as before slots were marked.
		return kindSession
	}
	if fi.Mode()&slotMode != 0 {
		return kindSlot
	}
	switch _, err := unix.Getxattr(dir, slotXattr, nil); {
	case err == nil:
		return kindSlot
	case errors.Is(err, unix.ENOENT):
		return kindGone
	}
	return kindSession
}

// ListSlots returns the ids of the slot groups under the parent (none
// claimed): a daemon's start removes what a crashed one left.
func ListSlots(cfg Config) ([]string, error) {
	mount, parent, err := cfg.resolve()
	if err != nil {
		return nil, fmt.Errorf("list session slots: %w", err)
	}
	dir := filepath.Join(mount, parent)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list session slots: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && ValidateSessionID(e.Name()) == nil && kindOf(filepath.Join(dir, e.Name())) == kindSlot {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}
