package agenthook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// settingsWithOthers is a user's Claude Code settings with keys before and
// after hooks, a Bash hook of their own and another event's hook.
const settingsWithOthers = `{
  "model": "opus",
  "permissions": {"allow": ["Bash(npm test)"], "deny": ["Read(./.env)"]},
  "hooks": {
    "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}],
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/audit-bash.sh", "timeout": 5}]}]
  },
  "env": {"FOO": "<bar> & \u2603"}
}
`

func preToolUseCommands(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Hooks struct {
			PreToolUse []struct {
				Matcher *string `json:"matcher"`
				Hooks   []struct {
					Type    string `json:"type"`
					Command string `json:"command"`
					Timeout int    `json:"timeout"`
				} `json:"hooks"`
			} `json:"PreToolUse"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s is no longer JSON: %v\n%s", path, err, b)
	}
	var out []string
	for _, g := range s.Hooks.PreToolUse {
		for _, h := range g.Hooks {
			out = append(out, h.Command)
		}
	}
	return out
}

func TestInstallIdempotent(t *testing.T) {
	dir := t.TempDir()
	for _, agent := range Agents() {
		path := SettingsPath(agent, false, dir, func(string) string { return "" })
		cmd := HookCommand("/usr/local/bin/oxsupervise", agent)
		ch, err := Install(path, cmd, agent)
		if err != nil || ch.Action != "created" {
			t.Fatalf("%s first install: %v, %+v; want created", agent, err, ch)
		}
		first, _ := os.ReadFile(path)
		if got := preToolUseCommands(t, path); len(got) != 1 || got[0] != cmd {
			t.Errorf("%s: PreToolUse commands %q, want [%q]", agent, got, cmd)
		}
		ch, err = Install(path, cmd, agent)
		if err != nil || ch.Action != "unchanged" || !strings.Contains(ch.String(), "unchanged") {
			t.Fatalf("%s second install: %v, %+v; want unchanged", agent, err, ch)
		}
		if second, _ := os.ReadFile(path); string(second) != string(first) {
			t.Errorf("%s: the second install changed the file:\n%s\n---\n%s", agent, first, second)
		}
		if agent == Codex {
			// Codex's HooksFile denies unknown fields: "hooks" only.
			var top map[string]json.RawMessage
			_ = json.Unmarshal(first, &top)
			if len(top) != 1 || top["hooks"] == nil {
				t.Errorf("codex hooks.json has keys other than hooks: %s", first)
			}
		}
	}
}

func TestInstallPreservesOtherSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(settingsWithOthers), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := HookCommand("/opt/ox supervise/oxsupervise", ClaudeCode)
	ch, err := Install(path, cmd, ClaudeCode)
	if err != nil || ch.Action != "added" {
		t.Fatalf("Install: %v, %+v; want added", err, ch)
	}
	if got := preToolUseCommands(t, path); len(got) != 2 || got[0] != "~/bin/audit-bash.sh" || got[1] != cmd {
		t.Errorf("PreToolUse commands %q, want the user's then ours", got)
	}
	b, _ := os.ReadFile(path)
	text := string(b)
	// Key order kept: model, permissions, hooks (PostToolUse first), env.
	order := []string{`"model"`, `"permissions"`, `"hooks"`, `"PostToolUse"`, `"PreToolUse"`, `"env"`}
	last := -1
	for _, k := range order {
		i := strings.Index(text, k)
		if i < last {
			t.Errorf("key %s moved (order %v):\n%s", k, order, text)
		}
		last = i
	}
	var got, want map[string]any
	_ = json.Unmarshal(b, &got)
	_ = json.Unmarshal([]byte(settingsWithOthers), &want)
	for _, k := range []string{"model", "permissions", "env"} {
		gb, _ := json.Marshal(got[k])
		wb, _ := json.Marshal(want[k])
		if string(gb) != string(wb) {
			t.Errorf("%s = %s, want %s", k, gb, wb)
		}
	}
	if !strings.Contains(text, `<bar> & \u2603`) {
		t.Errorf("the user's value was re-encoded:\n%s", text)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the file's 0600 kept", fi.Mode().Perm())
	}
}

func TestInstallUpdatesOlderPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	old := HookCommand("/usr/bin/oxsupervise", ClaudeCode)
	if _, err := Install(path, old, ClaudeCode); err != nil {
		t.Fatal(err)
	}
	cmd := HookCommand("/usr/local/bin/oxsupervise", ClaudeCode)
	ch, err := Install(path, cmd, ClaudeCode)
	if err != nil || ch.Action != "updated" || ch.Previous != old {
		t.Fatalf("Install: %v, %+v; want updated from %s", err, ch, old)
	}
	if got := preToolUseCommands(t, path); len(got) != 1 || got[0] != cmd {
		t.Errorf("PreToolUse commands %q, want only [%q]", got, cmd)
	}
	// The Codex hook in the same file is another agent's: not touched.
	if _, err := Install(path, HookCommand("/usr/local/bin/oxsupervise", Codex), Codex); err != nil {
		t.Fatal(err)
	}
	if got := preToolUseCommands(t, path); len(got) != 2 {
		t.Errorf("PreToolUse commands %q, want both agents' hooks", got)
	}
}

func TestInstallFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "dotfiles", "settings.json")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte(`{"model":"opus"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "settings.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(link, HookCommand("/usr/bin/oxsupervise", ClaudeCode), ClaudeCode); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", fi, err)
	}
	if got := preToolUseCommands(t, target); len(got) != 1 {
		t.Errorf("the link's target has hooks %q, want ours", got)
	}
}

func TestInstallRejectsBadFiles(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"syntax", "{\n  \"model\": \"opus\",\n  oops\n}", ":3:3"},
		{"array", `["not", "an", "object"]`, "settings.json"},
		{"hooks not an object", `{"hooks": []}`, `"hooks" must be an object`},
		{"PreToolUse not an array", `{"hooks": {"PreToolUse": {}}}`, `"hooks.PreToolUse" must be an array`},
	} {
		path := filepath.Join(t.TempDir(), "settings.json")
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Install(path, HookCommand("/usr/bin/oxsupervise", ClaudeCode), ClaudeCode)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
		if b, _ := os.ReadFile(path); string(b) != tc.content {
			t.Errorf("%s: a file that could not be read was changed", tc.name)
		}
	}
}

func TestSettingsPath(t *testing.T) {
	env := map[string]string{"CLAUDE_CONFIG_DIR": "/cfg/claude", "CODEX_HOME": "/cfg/codex"}
	for _, tc := range []struct {
		agent   Agent
		managed bool
		env     bool
		want    string
	}{
		{ClaudeCode, false, false, "/home/u/.claude/settings.json"},
		{ClaudeCode, false, true, "/cfg/claude/settings.json"},
		{ClaudeCode, true, true, "/etc/claude-code/managed-settings.json"},
		{Codex, false, false, "/home/u/.codex/hooks.json"},
		{Codex, false, true, "/cfg/codex/hooks.json"},
		{Codex, true, false, "/etc/codex/hooks.json"},
	} {
		get := func(string) string { return "" }
		if tc.env {
			get = func(k string) string { return env[k] }
		}
		if got := SettingsPath(tc.agent, tc.managed, "/home/u", get); got != tc.want {
			t.Errorf("SettingsPath(%s, managed=%t, env=%t) = %s, want %s", tc.agent, tc.managed, tc.env, got, tc.want)
		}
	}
}

func TestInstalled(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "settings.json")
	if ok, err := Installed(path, ClaudeCode); ok || err != nil {
		t.Errorf("missing file: %t, %v; want false, nil", ok, err)
	}
	if err := os.WriteFile(path, []byte(settingsWithOthers), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := Installed(path, ClaudeCode); ok || err != nil {
		t.Errorf("only the user's hooks: %t, %v; want false", ok, err)
	}
	if _, err := Install(path, HookCommand("/usr/bin/oxsupervise", ClaudeCode), ClaudeCode); err != nil {
		t.Fatal(err)
	}
	if ok, err := Installed(path, ClaudeCode); !ok || err != nil {
		t.Errorf("after Install: %t, %v; want true", ok, err)
	}
	if ok, _ := Installed(path, Codex); ok {
		t.Error("Claude Code's hook counted as Codex's")
	}
	if err := os.WriteFile(path, []byte("{\n oops"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Installed(path, ClaudeCode); err == nil || !strings.Contains(err.Error(), "settings.json:2:") {
		t.Errorf("broken file: error %v, want one naming settings.json:2:", err)
	}
}

func TestSharedTierWarning(t *testing.T) {
	dir := t.TempDir()
	settings := func(a Agent) []string {
		return []string{filepath.Join(dir, "managed-"+string(a)+".json"), filepath.Join(dir, "user-"+string(a)+".json")}
	}
	w, ok := SharedTierWarning("claude-code", settings)
	if !ok || !strings.Contains(w, "oxsupervise agent setup claude-code") {
		t.Errorf("no hook: %q, %t; want the warning with the set-up command", w, ok)
	}
	if _, ok := SharedTierWarning("aider", settings); ok {
		t.Error("aider has no hooks oxsupervise speaks, yet it is warned about")
	}
	for _, file := range settings(ClaudeCode) {
		p := filepath.Join(t.TempDir(), filepath.Base(file))
		one := func(Agent) []string { return []string{filepath.Join(dir, "absent.json"), p} }
		if _, err := Install(p, HookCommand("/usr/bin/oxsupervise", ClaudeCode), ClaudeCode); err != nil {
			t.Fatal(err)
		}
		if w, ok := SharedTierWarning("claude-code", one); ok {
			t.Errorf("hook in %s, still warned: %q", p, w)
		}
	}
	if err := os.WriteFile(settings(Codex)[1], []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if w, ok := SharedTierWarning("codex", settings); !ok || !strings.Contains(w, "user-codex.json") {
		t.Errorf("unreadable codex settings: %q, %t; want the warning naming the file", w, ok)
	}
	if got := AllSettings("/home/u", func(string) string { return "" })(Codex); len(got) != 2 || got[0] != "/etc/codex/hooks.json" || got[1] != "/home/u/.codex/hooks.json" {
		t.Errorf("AllSettings(codex) = %v", got)
	}
}
