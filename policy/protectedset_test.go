package policy

import (
	"slices"
	"strings"
	"testing"
)

// TestProtectedSetReasons: every built-in pattern has a reason, no pattern
// is listed twice (a configured or profile entry that is a built-in keeps
// the built-in's reason), and a configured one says where it came from.
func TestProtectedSetReasons(t *testing.T) {
	f := newFixture(t)
	f.write(t, "home/.openoxide/config.toml", "[sandbox]\nprotected_subpaths = [\"deploy/keys\", \".envrc\", \"opencode.json\"]\n")
	c, _, _, err := f.loadAgent(t, []string{"opencode"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, p := range c.ProtectedPatterns {
		key := string(p.Type) + " " + strings.Join(p.Components, "/")
		if seen[key]++; seen[key] > 1 {
			t.Errorf("pattern %s listed twice", key)
		}
		if p.Reason == "" {
			t.Errorf("pattern %s (%s) has no reason", key, p.Source)
		}
	}
	tests := []struct{ path, source, reason string }{
		{"deploy/keys", "config.toml", "listed in sandbox.protected_subpaths"},
		{".envrc", "default", "direnv runs it on cd"},
		{"opencode.json", "default", "OpenCode's project config"},
		{".opencode", "default", "OpenCode's plugins"},
		{".github/copilot-instructions.md", "default", "GitHub Copilot"},
		{".git/hooks", "default", "git runs the scripts in it"},
	}
	for _, tt := range tests {
		i := slices.IndexFunc(c.ProtectedPatterns, func(p ProtectedPattern) bool { return strings.Join(p.Components, "/") == tt.path })
		if i < 0 {
			t.Errorf("no pattern %s", tt.path)
			continue
		}
		if p := c.ProtectedPatterns[i]; !strings.Contains(p.Source, tt.source) || !strings.Contains(p.Reason, tt.reason) {
			t.Errorf("%s: source %q reason %q, want %q and %q", tt.path, p.Source, p.Reason, tt.source, tt.reason)
		}
	}
}
