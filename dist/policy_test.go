package dist

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/policy"
)

// defaultLine is a commented default in dist/policy/policy.toml: "#key =
// value" or "#[table]", with no space after the #; prose comments have one.
var defaultLine = regexp.MustCompile(`^#(\[[a-z_.]+\]|[a-z_]+ = .*)$`)

// loader loads the policy with a managed directory and nothing else: one
// empty home and workspace for every load, no $TMPDIR.
func loader(t *testing.T) func(dir string) *policy.Effective {
	base := t.TempDir()
	home, ws := filepath.Join(base, "home"), filepath.Join(base, "ws")
	for _, d := range []string{home, ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return func(dir string) *policy.Effective { return loadManaged(t, dir, home, ws) }
}

func loadManaged(t *testing.T, dir, home, ws string) *policy.Effective {
	t.Helper()
	_, eff, err := policy.Load(policy.LoadOptions{ManagedDir: dir, Home: home, Workspace: ws, Env: func(string) string { return "" }})
	if err != nil {
		t.Fatalf("policy.Load(managed %s): %v", dir, err)
	}
	return eff
}

func values(t *testing.T, eff *policy.Effective) map[string]policy.EffectiveValue {
	t.Helper()
	out := map[string]policy.EffectiveValue{}
	for _, v := range eff.Values {
		out[v.Key] = v
	}
	return out
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDefaultPolicyIsTheBuiltInDefaults holds the shipped
// /etc/oxsupervise/policy.toml to its promise: as shipped it changes
// nothing, and with every commented default uncommented it sets every key
// the loader knows to exactly the built-in default. A key added to the
// policy schema without a line here fails the test.
func TestDefaultPolicyIsTheBuiltInDefaults(t *testing.T) {
	data, err := os.ReadFile("policy/policy.toml")
	if err != nil {
		t.Fatal(err)
	}
	loadManaged := loader(t)
	builtin := values(t, loadManaged(t.TempDir()))

	shipped := t.TempDir()
	if err := os.WriteFile(filepath.Join(shipped, "policy.toml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range values(t, loadManaged(shipped)) {
		if b := builtin[k]; v.Source != b.Source || asJSON(t, v.Value) != asJSON(t, b.Value) {
			t.Errorf("shipped file changes %s: %s from %s, built in %s from %s", k, asJSON(t, v.Value), v.Source, asJSON(t, b.Value), b.Source)
		}
	}

	var lines []string
	uncommented := 0
	for _, l := range strings.Split(string(data), "\n") {
		if defaultLine.MatchString(l) {
			l = l[1:]
			uncommented++
		}
		lines = append(lines, l)
	}
	if uncommented < len(builtin) {
		t.Errorf("only %d commented defaults for %d keys", uncommented, len(builtin))
	}
	set := t.TempDir()
	file := filepath.Join(set, "policy.toml")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	got := values(t, loadManaged(set))
	if len(got) != len(builtin) {
		t.Errorf("uncommented file yields %d keys, built in %d", len(got), len(builtin))
	}
	for k, b := range builtin {
		v, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: missing from the effective policy", k)
		case b.Source != "default":
			// Not a policy key (the workspace comes from the directory).
		case !strings.HasPrefix(v.Source, file+":"):
			t.Errorf("%s: no commented default in policy.toml (set by %s)", k, v.Source)
		case asJSON(t, v.Value) != asJSON(t, b.Value):
			t.Errorf("%s: policy.toml says %s (%s), the built-in default is %s", k, asJSON(t, v.Value), v.Source, asJSON(t, b.Value))
		}
	}
}
