//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// slotXattr marks a group made ahead of its session (a daemon's slot):
// ListSessions does not list it until MarkClaimed removes the mark.
const slotXattr = "trusted.oxsupervise.slot"

// NewSlot is NewSession, without limits, for a group made ahead of its
// session: it is marked as a slot, and ListSessions leaves it out until
// MarkClaimed (then SetLimits gives it its session's limits).
func NewSlot(cfg Config, id string) (*Group, error) {
	g, err := NewSession(cfg, id, Limits{})
	if err != nil {
		return nil, err
	}
	if err := unix.Setxattr(g.Path, slotXattr, []byte{1}, 0); err != nil {
		os.Remove(g.Path)
		return nil, fmt.Errorf("create session slot %s: mark it: %w", id, err)
	}
	return g, nil
}

// MarkClaimed makes a slot's group a session's: ListSessions lists it.
func (g *Group) MarkClaimed() error {
	if err := unix.Removexattr(g.Path, slotXattr); err != nil && !errors.Is(err, unix.ENODATA) {
		return fmt.Errorf("claim session slot %s: %w", g.ID, err)
	}
	return nil
}

// isSlot reports whether dir is a slot's group, not claimed yet.
func isSlot(dir string) bool {
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
