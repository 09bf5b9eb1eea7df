//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// slotMode marks a group made ahead of its session (a daemon's slot): its
// directory has the sticky bit, which cgroupfs gives no other meaning. The
// mkdir itself sets it (no umask clears it), so no listing ever sees a
// slot unmarked: a mark added after the mkdir (slotXattr, as earlier
// versions did) left a moment in which ListSessions listed a slot as a
// session.
// ListSessions leaves a slot out until MarkClaimed clears the bit.
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

// isSlot reports whether dir is a slot's group, not claimed yet.
func isSlot(dir string) bool {
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&slotMode != 0 {
		return true
	}
	_, err := unix.Getxattr(dir, slotXattr, nil)
	return err == nil
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
		if e.IsDir() && ValidateSessionID(e.Name()) == nil && isSlot(filepath.Join(dir, e.Name())) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}
