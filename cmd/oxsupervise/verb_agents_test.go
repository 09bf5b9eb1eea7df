package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestAgentsVerb(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{nil, exitOK, []string{"claude-code — Claude Code", "codex — Codex CLI", "opencode — OpenCode", "aider — Aider",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1   https://code.claude.com/docs/en/env-vars",
			`sandbox_mode="danger-full-access"`, "rolled back after the session: ~/.claude.json keys mcpServers"}},
		{[]string{"codex"}, exitOK, []string{"~/.codex/config.toml", "auth.openai.com:443"}},
		{[]string{"claud"}, exitUsage, nil},
	} {
		var out, errb bytes.Buffer
		code := dispatch(append([]string{"agents"}, tc.args...), streams{strings.NewReader(""), &out, &errb})
		if code != tc.code {
			t.Errorf("agents %v: exit %d, want %d (stderr %q)", tc.args, code, tc.code, errb.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("agents %v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
	var out bytes.Buffer
	if code := dispatch([]string{"agents", "--json", "claude-code"}, streams{strings.NewReader(""), &out, &bytes.Buffer{}}); code != exitOK {
		t.Fatalf("agents --json: exit %d", code)
	}
	var list []struct {
		Name  string `json:"name"`
		State []struct {
			Value, Cite string
		} `json:"state"`
		DefaultEndpoints []struct{ Value string } `json:"default_endpoints"`
	}
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list) != 1 || list[0].Name != "claude-code" {
		t.Fatalf("agents --json: %v %s", err, out.String())
	}
	if len(list[0].State) == 0 || list[0].State[0].Cite == "" || len(list[0].DefaultEndpoints) == 0 || list[0].DefaultEndpoints[0].Value != "https://api.anthropic.com" {
		t.Errorf("agents --json content: %+v", list[0])
	}
}
