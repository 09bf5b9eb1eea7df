package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Snapshot holds, for each of a profile's guarded state files, the values
// of its program-starting keys before a session.
type Snapshot struct {
	profile string
	files   []fileSnap
}

type fileSnap struct {
	guard GuardedFile
	path  string
	// keys maps "KEY" and "projects/PROJECT/KEY" to the raw JSON value
	// (nil: absent).
	keys map[string]json.RawMessage
	ok   bool // the file parsed as a JSON object
}

// Rollback is one program-starting key a session changed and that was put
// back.
type Rollback struct {
	Profile string
	File    string
	// Key is "mcpServers" or "projects/DIR/mcpServers".
	Key  string
	Cite string
}

// Snapshot reads the guarded keys of the profile's state files in home.
func (p *Profile) Snapshot(home string) *Snapshot {
	s := &Snapshot{profile: p.Name}
	for _, g := range p.Guarded {
		f := fileSnap{guard: g, path: Expand(g.Path, home)}
		f.keys, f.ok = guardedKeys(f.path, g)
		s.files = append(s.files, f)
	}
	return s
}

func readObject(path string) (map[string]json.RawMessage, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

func guardedKeys(path string, g GuardedFile) (map[string]json.RawMessage, bool) {
	obj, ok := readObject(path)
	out := map[string]json.RawMessage{}
	if !ok {
		return out, false
	}
	for _, k := range g.Keys {
		out[k] = obj[k]
	}
	var projects map[string]map[string]json.RawMessage
	json.Unmarshal(obj["projects"], &projects)
	for dir, proj := range projects {
		for _, k := range g.ProjectKeys {
			out["projects/"+dir+"/"+k] = proj[k]
		}
	}
	return out, true
}

// Restore puts every guarded key that differs from the snapshot back
// (removing keys the session added) and returns what it rolled back. The
// file is rewritten in place, keeping its owner and mode, and only when
// it is owned by uid (the session's user: a supervisor running as root
// never writes someone else's file); the rest of it (the agent's state)
// stays as the session left it.
func (s *Snapshot) Restore(uid int) ([]Rollback, error) {
	var out []Rollback
	for _, f := range s.files {
		obj, ok := readObject(f.path)
		if !ok {
			continue // gone or not JSON: nothing the agent can start from
		}
		now, _ := guardedKeys(f.path, f.guard)
		var changed []string
		for k, v := range now {
			if !bytes.Equal(v, f.keys[k]) {
				changed = append(changed, k)
			}
		}
		for k, v := range f.keys {
			if _, still := now[k]; !still && v != nil {
				changed = append(changed, k)
			}
		}
		if len(changed) == 0 {
			continue
		}
		slices.Sort(changed)
		changed = slices.Compact(changed)
		var projects map[string]map[string]json.RawMessage
		json.Unmarshal(obj["projects"], &projects)
		for _, k := range changed {
			old := f.keys[k]
			if slices.Contains(f.guard.Keys, k) {
				setRaw(obj, k, old)
			} else if dir, key, ok := splitProjectKey(k); ok {
				if projects[dir] == nil {
					continue
				}
				setRaw(projects[dir], key, old)
			}
			out = append(out, Rollback{Profile: s.profile, File: f.path, Key: k, Cite: f.guard.Cite})
		}
		if projects != nil {
			b, err := json.Marshal(projects)
			if err != nil {
				return out, err
			}
			obj["projects"] = b
		}
		b, err := json.MarshalIndent(obj, "", "  ")
		if err != nil {
			return out, err
		}
		if err := rewriteOwned(f.path, append(b, '\n'), uid); err != nil {
			return out, fmt.Errorf("agent %s: roll back %s: %w", s.profile, f.path, err)
		}
	}
	return out, nil
}

func setRaw(m map[string]json.RawMessage, k string, v json.RawMessage) {
	if v == nil {
		delete(m, k)
		return
	}
	m[k] = v
}

// splitProjectKey splits "projects/DIR/KEY" (DIR may hold slashes).
func splitProjectKey(k string) (dir, key string, ok bool) {
	rest, ok := strings.CutPrefix(k, "projects/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}
