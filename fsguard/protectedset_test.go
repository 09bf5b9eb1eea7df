package fsguard

import (
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/policy"
)

// TestDefaultProtectedSetCompiles: the built-in protected set, as a
// default policy compiles it, fits the BPF programs' NFA, and the NFA
// judges the set's entries (multi-component ones included) exactly as
// policy.ProtectedPrefix does, the matcher of the Landlock path's scan and
// quarantine.
func TestDefaultProtectedSetCompiles(t *testing.T) {
	dir := t.TempDir()
	c, _, err := policy.Load(policy.LoadOptions{
		ManagedDir: dir + "/managed", Home: dir, Workspace: dir,
		Flags: &policy.Flags{}, Env: func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := compilePatterns(c.ProtectedPatterns)
	if err != nil {
		t.Fatalf("the default protected set does not fit the BPF NFA: %v", err)
	}
	used := 0
	for _, p := range c.ProtectedPatterns {
		used += len(p.Components)
	}
	t.Logf("default protected set: %d patterns, %d of %d NFA bits", len(c.ProtectedPatterns), used, nfaBits)
	paths := []struct {
		path         string
		isDir, wants bool
	}{
		{".devcontainer", true, true}, {".devcontainer/devcontainer.json", false, true}, {"sub/.devcontainer.json", false, true},
		{"opencode.json", false, true}, {"opencode.jsonc", false, true}, {".opencode/plugin/x.ts", false, true},
		{".aider.conf.yml", false, true}, {".aider.model.settings.yml", false, true},
		{".aider.model.metadata.json", false, false}, {".aider.chat.history.md", false, false},
		{"GEMINI.md", false, true}, {".gemini/settings.json", false, true},
		{".github", true, false}, {".github/copilot-instructions.md", false, true}, {"pkg/.github/copilot-instructions.md", false, true},
		{".github/instructions/go.instructions.md", false, true}, {".github/workflows/ci.yml", false, false},
		{"copilot-instructions.md", false, false}, {".cursorrules", false, true}, {".windsurfrules", false, true},
		{".clinerules", true, true}, {".husky/pre-commit", false, true}, {".pre-commit-config.yaml", false, true},
		{"lefthook.yml", false, true}, {"mise.toml", false, true}, {".envrc", false, true},
		{".git/hooks/pre-commit", false, true}, {".git/objects/ab", true, false},
		{"src/main.go", false, false}, {"README.md", false, false},
	}
	for _, p := range paths {
		comps := strings.Split(p.path, "/")
		leaf := entryFile
		if p.isDir {
			leaf = entryDir
		}
		bpf := !n.match(comps, leaf, false).empty()
		k, _ := c.ProtectedPrefix(comps, p.isDir)
		if bpf != p.wants || (k > 0) != p.wants {
			t.Errorf("%s: BPF NFA protects %t, policy.ProtectedPrefix %t; want %t", p.path, bpf, k > 0, p.wants)
		}
	}
}
