package windows

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// JournalVersion is the format version of undo journals.
const JournalVersion = 1

// EntryState tracks one ACE through its life. An entry is written as
// planned before the ACL is touched, so a crash between the two leaves a
// planned entry whose undo is harmless (removing ACEs by session SID is
// idempotent).
type EntryState string

const (
	StatePlanned  EntryState = "planned"
	StateApplied  EntryState = "applied"
	StateReverted EntryState = "reverted"
)

// JournalEntry is one ACE change and how far it got.
type JournalEntry struct {
	ACE
	State EntryState `json:"state"`
	// OriginalSDDL is the path's DACL before the change, kept for
	// forensics; undo does not restore it (that would erase ACL changes
	// others made during the session) but removes the session SID's ACEs.
	OriginalSDDL string `json:"original_sddl,omitempty"`
}

// Journal records a session's ACE changes so they can be undone after the
// session, also after a supervisor crash.
type Journal struct {
	Version    int    `json:"version"`
	SessionID  string `json:"session_id"`
	SessionSID string `json:"session_sid"`
	// OwnerPID and OwnerStart (process creation time, Unix ns) identify the
	// supervisor that owns the session; a journal whose owner is gone is
	// stale and gets replayed.
	OwnerPID   int            `json:"owner_pid"`
	OwnerStart int64          `json:"owner_start"`
	Created    time.Time      `json:"created"`
	Entries    []JournalEntry `json:"entries"`
}

// NewJournal starts a journal with every ACE of p as planned.
func NewJournal(p *Plan, ownerPID int, ownerStart int64, now time.Time) *Journal {
	j := &Journal{Version: JournalVersion, SessionID: p.SessionID, SessionSID: p.SessionSID,
		OwnerPID: ownerPID, OwnerStart: ownerStart, Created: now.UTC()}
	for _, a := range p.ACEs {
		j.Entries = append(j.Entries, JournalEntry{ACE: a, State: StatePlanned})
	}
	return j
}

// JournalPath is where the journal of session id lives inside dir.
func JournalPath(dir, sessionID string) string {
	return filepath.Join(dir, "session-"+sessionID+".acl-journal.json")
}

// Save writes j to path atomically (temporary file, sync, rename), so a
// crash leaves either the old or the new journal, never a torn one.
func (j *Journal) Save(path string) error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("encode journal: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".journal-*")
	if err != nil {
		return fmt.Errorf("save journal %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save journal %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save journal %s: sync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save journal %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save journal %s: %w", path, err)
	}
	return nil
}

// LoadJournal reads and validates a journal.
func LoadJournal(path string) (*Journal, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load journal: %w", err)
	}
	var j Journal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("load journal %s: %w", path, err)
	}
	if j.Version != JournalVersion {
		return nil, fmt.Errorf("load journal %s: version %d, want %d", path, j.Version, JournalVersion)
	}
	want, err := SessionSID(j.SessionID)
	if err != nil {
		return nil, fmt.Errorf("load journal %s: %w", path, err)
	}
	if j.SessionSID != want {
		// The SID is derived from the session id; a mismatch means the
		// file was edited, and undo would revoke the wrong trustee.
		return nil, fmt.Errorf("load journal %s: session SID %q does not belong to session %q", path, j.SessionSID, j.SessionID)
	}
	for i, e := range j.Entries {
		if e.SID != j.SessionSID {
			return nil, fmt.Errorf("load journal %s: entry %d names SID %q, not the session's", path, i, e.SID)
		}
		switch e.State {
		case StatePlanned, StateApplied, StateReverted:
		default:
			return nil, fmt.Errorf("load journal %s: entry %d has unknown state %q", path, i, e.State)
		}
	}
	return &j, nil
}

// RevokeFunc removes every ACE for sid from path's DACL. It must be
// idempotent and return an error wrapping fs.ErrNotExist when path is gone.
type RevokeFunc func(path, sid string) error

// Undo reverts every entry not yet reverted, newest first, saving the
// journal after each step through save. Entries whose path no longer
// exists count as reverted. It continues past failures and returns them
// joined, so one locked file does not leave every other grant in place.
func (j *Journal) Undo(revoke RevokeFunc, save func(*Journal) error) error {
	var errs []error
	done := map[string]bool{}
	for i := len(j.Entries) - 1; i >= 0; i-- {
		e := &j.Entries[i]
		if e.State == StateReverted {
			continue
		}
		key := strings.ToLower(e.Path)
		if !done[key] {
			err := revoke(e.Path, e.SID)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("revoke %s on %s: %w", e.SID, e.Path, err))
				continue
			}
			done[key] = true
		}
		e.State = StateReverted
		if err := save(j); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	return errors.Join(errs...)
}

// Complete reports whether every entry is reverted.
func (j *Journal) Complete() bool {
	for _, e := range j.Entries {
		if e.State != StateReverted {
			return false
		}
	}
	return true
}

// AliveFunc reports whether the process with pid and creation time start
// still runs (a reused pid with another start time is not alive).
type AliveFunc func(pid int, start int64) bool

// Recovered is the outcome of replaying one stale journal.
type Recovered struct {
	Path      string
	SessionID string
	Err       error
}

// RecoverStale replays the journals in dir whose owner is no longer
// running and deletes those fully undone. Journals of live supervisors are
// left alone. Unreadable journals are reported, not deleted: they may name
// grants that still need undoing by hand.
func RecoverStale(dir string, alive AliveFunc, revoke RevokeFunc) ([]Recovered, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "session-*.acl-journal.json"))
	if err != nil {
		return nil, fmt.Errorf("scan journals in %s: %w", dir, err)
	}
	var out []Recovered
	for _, path := range matches {
		j, err := LoadJournal(path)
		if err != nil {
			out = append(out, Recovered{Path: path, Err: err})
			continue
		}
		if alive(j.OwnerPID, j.OwnerStart) {
			continue
		}
		err = j.Undo(revoke, func(j *Journal) error { return j.Save(path) })
		if err == nil && j.Complete() {
			if rmErr := os.Remove(path); rmErr != nil {
				err = fmt.Errorf("remove replayed journal: %w", rmErr)
			}
		}
		out = append(out, Recovered{Path: path, SessionID: j.SessionID, Err: err})
	}
	return out, nil
}
