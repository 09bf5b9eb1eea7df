package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const hookManaged = `[[permissions.rules]]
tool = "bash"
pattern = "rm *"
action = "deny"

[[permissions.rules]]
tool = "bash"
pattern = "git *"
action = "allow"
`

func hookInput(tool, field, value string) string {
	b, _ := json.Marshal(map[string]any{
		"session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": "/w", "permission_mode": "default",
		"hook_event_name": "PreToolUse", "tool_name": tool, "tool_use_id": "toolu_1",
		"tool_input": map[string]any{field: value, "description": "d"},
	})
	return string(b)
}

// insideSession is what an allowed command inside a session comes back
// as: rewritten into a nested run once `run` can nest (nestedRunReady),
// judged only before that.
func insideSession() []string {
	if !nestedRunReady {
		return []string{`"permissionDecision":"allow"`, `pattern = \"git *\"`}
	}
	return []string{`"permissionDecision":"allow"`, `"updatedInput":{`, `run --tier=command --agent=claude-code -- bash -c 'git log'`, `"description":"d"`}
}

// TestHookVerb drives `oxsupervise hook` as the agents do: JSON on stdin,
// the managed policy's rules, the answer on stdout or a block (exit 2).
func TestHookVerb(t *testing.T) {
	root, _ := policyFixture(t)
	writeFile(t, filepath.Join(root, "etc", "policy.toml"), hookManaged)
	for _, tc := range []struct {
		name, agent, stdin string
		inSession          bool
		code               int
		want               []string // pieces of stdout (code 0) or stderr (code 2)
	}{
		{name: "deny reaches the model with the rule", agent: "claude-code", stdin: hookInput("Bash", "command", "git status; rm -rf /"),
			want: []string{`"permissionDecision":"deny"`, `pattern = \"rm *\"`, "policy.toml:"}},
		{name: "allow outside a session is not rewritten", agent: "claude-code", stdin: hookInput("Bash", "command", "git log"),
			want: []string{`"permissionDecision":"allow"`}},
		{name: "allow inside a session is nested once run can nest", agent: "claude-code", stdin: hookInput("Bash", "command", "git log"), inSession: true,
			want: insideSession()},
		{name: "codex ask is refused", agent: "codex", stdin: hookInput("Bash", "command", "make"), inSession: true,
			want: []string{`"permissionDecision":"deny"`, "cannot ask"}},
		{name: "bad input blocks", agent: "codex", stdin: `{"hook_event_name":"PreToolUse"`, code: exitHookBlock,
			want: []string{"blocked", "bad hook input"}},
		{name: "unknown agent", agent: "cursor", stdin: "{}", code: exitUsage, want: []string{"unknown agent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			session := ""
			if tc.inSession {
				session = "parent-session"
			}
			t.Setenv("OXSUPERVISE_SESSION", session)
			var out, errb bytes.Buffer
			code := dispatch([]string{"hook", tc.agent}, streams{strings.NewReader(tc.stdin), &out, &errb})
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tc.code, out.String(), errb.String())
			}
			got := out.String()
			if tc.code != exitOK {
				got = errb.String()
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output %q lacks %q", got, w)
				}
			}
			if tc.inSession && !nestedRunReady && strings.Contains(out.String(), "updatedInput") {
				t.Errorf("rewritten before run can nest: %s", out.String())
			}
			if tc.code == exitOK && !json.Valid(out.Bytes()) {
				t.Errorf("stdout is not one JSON value: %q", out.String())
			}
		})
	}
	// A policy that cannot be loaded blocks every call.
	writeFile(t, filepath.Join(root, "etc", "policy.toml"), "[sandbox]\nmode = 3\n")
	var out, errb bytes.Buffer
	if code := dispatch([]string{"hook", "claude-code"}, streams{strings.NewReader(hookInput("Bash", "command", "git log")), &out, &errb}); code != exitHookBlock || out.Len() != 0 || !strings.Contains(errb.String(), "policy.toml") {
		t.Errorf("broken policy: exit %d, stdout %q, stderr %q; want a block naming the file", code, out.String(), errb.String())
	}
}

func TestAgentSetupVerb(t *testing.T) {
	root, _ := policyFixture(t)
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CODEX_HOME", "")
	settings := filepath.Join(root, "home", ".claude", "settings.json")
	writeFile(t, settings, `{"model": "opus"}`)
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := dispatch(append([]string{"agent", "setup"}, args...), streams{strings.NewReader(""), &out, &errb})
		return code, out.String() + errb.String()
	}
	code, msg := run("claude-code", "--exe", "/usr/local/bin/oxsupervise")
	if code != exitOK || !strings.Contains(msg, "added the PreToolUse hook /usr/local/bin/oxsupervise hook claude-code") || !strings.Contains(msg, settings) {
		t.Fatalf("first setup: exit %d: %s", code, msg)
	}
	code, msg = run("claude-code", "--exe", "/usr/local/bin/oxsupervise")
	if code != exitOK || !strings.Contains(msg, "unchanged") {
		t.Errorf("second setup: exit %d: %s; want unchanged", code, msg)
	}
	b, _ := os.ReadFile(settings)
	if !strings.Contains(string(b), `"model": "opus"`) {
		t.Errorf("the user's setting was lost:\n%s", b)
	}
	code, msg = run("codex", "--exe", "/usr/local/bin/oxsupervise")
	if code != exitOK || !strings.Contains(msg, filepath.Join(root, "home", ".codex", "hooks.json")) || !strings.Contains(msg, "trust") {
		t.Errorf("codex setup: exit %d: %s; want the hooks.json path and the trust note", code, msg)
	}
	if code, msg = run("aider"); code != exitUsage {
		t.Errorf("unknown agent: exit %d: %s", code, msg)
	}
	if code, msg = run(); code != exitUsage {
		t.Errorf("no agent: exit %d: %s", code, msg)
	}
}
