package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DefaultRegistryDir holds one JSON file per session.
const DefaultRegistryDir = "/run/oxsupervise/sessions"

// Kind says how a session was created.
type Kind string

const (
	KindRun    Kind = "run"
	KindAttach Kind = "attach"
)

// Entry is a session's registry record.
type Entry struct {
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// SupervisorPID is the `run` process that owns the session; 0 for
	// attach sessions, which outlive the command that created them.
	SupervisorPID int       `json:"supervisor_pid,omitempty"`
	PID           int       `json:"pid"`
	UID           int       `json:"uid"`
	Mode          string    `json:"mode"`
	Cgroup        string    `json:"cgroup"`
	CgroupID      uint64    `json:"cgroup_id"`
	Command       []string  `json:"command,omitempty"`
	Layers        []string  `json:"layers"`
	PolicyDigest  string    `json:"policy_digest,omitempty"`
	Started       time.Time `json:"started"`
	// Launcher is the launcher the session's command was started by
	// (launcherCommand): the launcher program, or the supervisor
	// re-executed; "" for attach sessions.
	Launcher string `json:"launcher,omitempty"`
}

// Registry is the directory of session entries.
type Registry struct {
	Dir string
}

func (r Registry) dir() string {
	if r.Dir == "" {
		return DefaultRegistryDir
	}
	return r.Dir
}

func (r Registry) path(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return "", fmt.Errorf("session id %q is not a valid name", id)
	}
	return filepath.Join(r.dir(), id+".json"), nil
}

// Put writes e atomically (rename), readable by root only.
func (r Registry) Put(e Entry) error {
	p, err := r.path(e.ID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.dir(), 0o700); err != nil {
		return fmt.Errorf("session registry: %w", err)
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("session registry: encode %s: %w", e.ID, err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("session registry: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("session registry: %w", err)
	}
	return nil
}

// Get reads one entry.
func (r Registry) Get(id string) (Entry, error) {
	var e Entry
	p, err := r.path(id)
	if err != nil {
		return e, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return e, fmt.Errorf("session registry: %w", err)
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("session registry: decode %s: %w", p, err)
	}
	return e, nil
}

// Delete removes an entry; a missing entry is not an error.
func (r Registry) Delete(id string) error {
	p, err := r.path(id)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("session registry: %w", err)
	}
	return nil
}

// List returns every entry, sorted by start time. Unreadable entries are
// reported, not skipped.
func (r Registry) List() ([]Entry, error) {
	names, err := filepath.Glob(filepath.Join(r.dir(), "*.json"))
	if err != nil {
		return nil, fmt.Errorf("session registry: %w", err)
	}
	var out []Entry
	var errs []error
	for _, n := range names {
		e, err := r.Get(strings.TrimSuffix(filepath.Base(n), ".json"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, errors.Join(errs...)
}
