package agenthook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// HookTimeoutSeconds is the timeout written with the hook: the hook loads
// the policy for every call, which takes milliseconds; an agent's default
// (Claude Code 60 s, Codex 600 s) would hold a hung call far longer.
const HookTimeoutSeconds = 30

// SettingsPath is the file Install edits for agent: the user's settings
// below home, or the agent's managed (fleet) settings.
//
//   - Claude Code: ~/.claude/settings.json ($CLAUDE_CONFIG_DIR/settings.json
//     when set), managed /etc/claude-code/managed-settings.json
//     (https://code.claude.com/docs/en/settings, "Settings files").
//   - Codex: ~/.codex/hooks.json ($CODEX_HOME/hooks.json when set),
//     managed /etc/codex/hooks.json: Codex reads hooks.json from the folder
//     of each config layer, /etc/codex being the system layer, whose hooks
//     are managed and need no trust review (github:openai/codex
//     codex-rs/hooks/src/engine/discovery.rs, load_hooks_json and
//     hook_metadata_for_config_layer_source).
func SettingsPath(agent Agent, managed bool, home string, env func(string) string) string {
	switch agent {
	case ClaudeCode:
		if managed {
			return "/etc/claude-code/managed-settings.json"
		}
		if d := env("CLAUDE_CONFIG_DIR"); d != "" {
			return filepath.Join(d, "settings.json")
		}
		return filepath.Join(home, ".claude", "settings.json")
	case Codex:
		if managed {
			return "/etc/codex/hooks.json"
		}
		if d := env("CODEX_HOME"); d != "" {
			return filepath.Join(d, "hooks.json")
		}
		return filepath.Join(home, ".codex", "hooks.json")
	}
	return ""
}

// HookCommand is the command line the agent runs for the hook.
func HookCommand(exe string, agent Agent) string {
	return ShellQuote(exe) + " hook " + string(agent)
}

// isOurs reports whether a hook command line is an oxsupervise hook for
// agent, whatever executable path it names (an upgrade may move it).
func isOurs(command string, agent Agent) bool {
	return strings.HasSuffix(strings.TrimSpace(command), " hook "+string(agent)) && strings.Contains(command, "oxsupervise")
}

// Change is what Install did.
type Change struct {
	Path string
	// Action is "created" (the file did not exist), "added" (the hook was
	// added to an existing file), "updated" (an older oxsupervise hook
	// command was replaced) or "unchanged".
	Action string
	// Previous is the replaced command line, for "updated".
	Previous string
	Command  string
}

func (c Change) String() string {
	switch c.Action {
	case "unchanged":
		return fmt.Sprintf("%s: unchanged (the PreToolUse hook %s is already installed)", c.Path, c.Command)
	case "updated":
		return fmt.Sprintf("%s: updated the PreToolUse hook from %s to %s", c.Path, c.Previous, c.Command)
	case "created":
		return fmt.Sprintf("%s: created, with the PreToolUse hook %s", c.Path, c.Command)
	}
	return fmt.Sprintf("%s: added the PreToolUse hook %s", c.Path, c.Command)
}

// Install puts the PreToolUse hook command into the settings file at
// path (the hooks.PreToolUse list both agents read), keeping every other
// key, hook and the order of the file's keys. It is idempotent: with the
// hook already there it changes nothing and says so. A symlinked settings
// file is edited where it points (dotfile managers link them). The file is
// replaced atomically, with its mode and owner.
func Install(path, command string, agent Agent) (Change, error) {
	ch := Change{Path: path, Command: command}
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	old, err := os.ReadFile(path)
	var root *object
	switch {
	case errors.Is(err, fs.ErrNotExist):
		ch.Action, root = "created", &object{vals: map[string]json.RawMessage{}}
	case err != nil:
		return ch, fmt.Errorf("read %s: %w", path, err)
	case len(bytes.TrimSpace(old)) == 0:
		ch.Action, root = "added", &object{vals: map[string]json.RawMessage{}}
	default:
		if root, err = parseObject(old); err != nil {
			return ch, fmt.Errorf("%s: %w", positioned(path, old, err), err)
		}
	}

	hooks := &object{vals: map[string]json.RawMessage{}}
	if raw, ok := root.vals["hooks"]; ok {
		if hooks, err = parseObject(raw); err != nil {
			return ch, fmt.Errorf("%s: \"hooks\" must be an object: %w", path, err)
		}
	}
	var groups []json.RawMessage
	if raw, ok := hooks.vals["PreToolUse"]; ok {
		if err := json.Unmarshal(raw, &groups); err != nil {
			return ch, fmt.Errorf("%s: \"hooks.PreToolUse\" must be an array: %w", path, err)
		}
	}

	found := false
	for gi, g := range groups {
		var group struct {
			Hooks []map[string]json.RawMessage `json:"hooks"`
		}
		if json.Unmarshal(g, &group) != nil {
			continue // not ours to judge; kept as it is
		}
		for hi, h := range group.Hooks {
			var cmd string
			if json.Unmarshal(h["command"], &cmd) != nil || !isOurs(cmd, agent) {
				continue
			}
			found = true
			if cmd == command {
				continue
			}
			// Replace the command in place, keeping the group as it was.
			gobj, err := parseObject(g)
			if err != nil {
				return ch, fmt.Errorf("%s: hooks.PreToolUse[%d]: %w", path, gi, err)
			}
			h["command"], _ = json.Marshal(command)
			group.Hooks[hi] = h
			gobj.set("hooks", mustMarshal(group.Hooks))
			groups[gi] = gobj.marshal()
			ch.Action, ch.Previous = "updated", cmd
		}
	}
	if found && ch.Action != "updated" {
		ch.Action = "unchanged"
		return ch, nil
	}
	if !found {
		// No matcher: every tool call is judged by the permission rules
		// (Claude Code and Codex both match every tool when it is absent).
		groups = append(groups, mustMarshal(map[string]any{
			"hooks": []map[string]any{{"type": "command", "command": command, "timeout": HookTimeoutSeconds}},
		}))
		if ch.Action == "" {
			ch.Action = "added"
		}
	}
	hooks.set("PreToolUse", mustMarshal(groups))
	root.set("hooks", hooks.marshal())
	var out bytes.Buffer
	if err := json.Indent(&out, root.marshal(), "", "  "); err != nil {
		return ch, fmt.Errorf("%s: encode: %w", path, err)
	}
	out.WriteByte('\n')
	return ch, writeAtomic(path, out.Bytes())
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain maps, slices and raw messages reach here
	}
	return b
}

// writeAtomic replaces path with data through a temporary file beside it,
// keeping an existing file's mode and owner.
func writeAtomic(path string, data []byte) error {
	mode := fs.FileMode(0o644)
	uid, gid := -1, -1
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
		uid, gid = fileOwner(fi)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".oxsupervise-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if uid >= 0 && os.Geteuid() == 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			tmp.Close()
			return fmt.Errorf("chown %s: %w", tmp.Name(), err)
		}
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// object is a JSON object that keeps its keys' order and its values as
// written, so that an edit changes only what it means to.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func parseObject(b []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, &json.SyntaxError{Offset: dec.InputOffset()}
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if _, dup := o.vals[key]; !dup {
			o.keys = append(o.keys, key)
		}
		o.vals[key] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("data after the top-level object")
	}
	return o, nil
}

func (o *object) set(key string, v json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

func (o *object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// positioned names path:line:col of a JSON syntax error.
func positioned(path string, data []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return path
	}
	off := min(int(se.Offset), len(data))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("%s:%d:%d", path, line, col)
}

// Installed reports whether the settings file at path has an oxsupervise
// PreToolUse hook for agent (any executable path), for the warning a
// session with the agent's profile gives when commands would share the
// agent's tier. A missing file is not an error: no hook.
func Installed(path string, agent Agent) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	var s struct {
		Hooks struct {
			PreToolUse []struct {
				Hooks []struct {
					Command string `json:"command"`
				} `json:"hooks"`
			} `json:"PreToolUse"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return false, fmt.Errorf("%s: %w", positioned(path, b, err), err)
	}
	for _, g := range s.Hooks.PreToolUse {
		for _, h := range g.Hooks {
			if isOurs(h.Command, agent) {
				return true, nil
			}
		}
	}
	return false, nil
}

// AllSettings lists the settings files an agent reads hooks from, managed
// first: SettingsPath's managed and user files.
func AllSettings(home string, env func(string) string) func(Agent) []string {
	return func(a Agent) []string {
		return []string{SettingsPath(a, true, home, env), SettingsPath(a, false, home, env)}
	}
}

// SharedTierWarning is what a session started with an agent's profile
// says once (on stderr and in its session_start record) when none of the
// agent's settings files (settings, usually AllSettings) has an
// oxsupervise hook: its commands then run in the agent's own session,
// with its credentials and hosts. ok is false when the hook is installed,
// or the profile is not an agent whose hooks oxsupervise speaks. A
// settings file that cannot be read counts as no hook, and the warning
// says why.
func SharedTierWarning(profile string, settings func(Agent) []string) (warning string, ok bool) {
	agent, err := ParseAgent(profile)
	if err != nil {
		return "", false
	}
	var problems []string
	for _, path := range settings(agent) {
		found, err := Installed(path, agent)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if found {
			return "", false
		}
	}
	w := fmt.Sprintf("no oxsupervise hook in %s's settings: the commands it runs share its session (its credentials and its API hosts); run `oxsupervise agent setup %s` to give them the command tier", agent, agent)
	if len(problems) > 0 {
		w += " (" + strings.Join(problems, "; ") + ")"
	}
	return w, true
}
