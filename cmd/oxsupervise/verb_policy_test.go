package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// updateGolden rewrites testdata/policy/*.golden: go test ./cmd/oxsupervise -run TestPolicyShowGolden -update
var updateGolden = lookupOrDefineBool("update", "rewrite golden files")

func lookupOrDefineBool(name, usage string) *bool {
	if f := flag.Lookup(name); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			if b, ok := g.Get().(bool); ok {
				v := b
				return &v
			}
		}
	}
	return flag.Bool(name, false, usage)
}

// policyFixture lays out a managed dir, home and workspace under one temp
// root and points the policy verb at them through the environment.
func policyFixture(t *testing.T) (root, ws string) {
	t.Helper()
	root = t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	ws = filepath.Join(root, "ws")
	for _, d := range []string{"etc/policy.d", "home/.openoxide", "ws/.git/hooks", "ws/.openoxide", "tmpdir", "scratch"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("TMPDIR", filepath.Join(root, "tmpdir"))
	t.Setenv("OXSUPERVISE_MANAGED_DIR", filepath.Join(root, "etc"))
	return root, ws
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	goldenManaged = `[sandbox]
allowed_modes = ["read-only", "workspace-write"]
excluded_commands = ["docker"]
[network]
policy = "allowlist"
allow = ["github.com", "*.npmjs.org", "10.0.0.0/8:443"]
[[permissions.rules]]
tool = "bash"
pattern = "rm *"
action = "deny"
[managed]
locked = ["sandbox.mode", "network.allow", "limits"]
`
	goldenDropIn = `[limits]
pids_max = 4096
memory_max = "8G"
`
	goldenUser = `[sandbox]
writable_roots = ["~/../scratch"]
[network]
allow = ["github.com"]
loopback = "none"
[[permissions.rules]]
tool = "bash"
pattern = "git *"
action = "allow"
[agent.plan.permission]
default = "deny"
`
	goldenWorkspace = `[sandbox]
protected_subpaths = ["deploy/keys"]
[env]
passthrough = ["GH_TOKEN"]
`
)

// normalise replaces what differs between machines and runs.
func normalise(s, root string) string {
	s = strings.ReplaceAll(s, root, "$ROOT")
	s = regexp.MustCompile(`"(dev|ino)": \d+`).ReplaceAllString(s, `"$1": N`)
	s = regexp.MustCompile(`sha256:[0-9a-f]{64}`).ReplaceAllString(s, "sha256:DIGEST")
	return s
}

func TestPolicyShowGolden(t *testing.T) {
	tests := []struct {
		name    string
		layered bool
		args    []string
	}{
		{"default", false, []string{"--bind"}},
		{"default-json", false, []string{"--bind", "--json"}},
		{"layered", true, []string{"--bind", "--full-auto"}},
		{"layered-json", true, []string{"--bind", "--json", "-s", "read-only"}},
		// Without --bind, the resolve step alone: the same effective
		// values, no compiled anchors.
		{"resolved", true, []string{"--full-auto"}},
		{"resolved-json", true, []string{"--json", "-s", "read-only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, ws := policyFixture(t)
			if tt.layered {
				writeFile(t, filepath.Join(root, "etc/policy.toml"), goldenManaged)
				writeFile(t, filepath.Join(root, "etc/policy.d/50-limits.toml"), goldenDropIn)
				writeFile(t, filepath.Join(root, "home/.openoxide/config.toml"), goldenUser)
				writeFile(t, filepath.Join(ws, ".openoxide/config.toml"), goldenWorkspace)
			}
			var out, errb bytes.Buffer
			args := append([]string{"policy", "show", "--workspace", ws}, tt.args...)
			if code := dispatch(args, streams{strings.NewReader(""), &out, &errb}); code != exitOK {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			got := normalise(out.String(), root)
			golden := filepath.Join("..", "..", "testdata", "policy", "show-"+tt.name+".golden")
			if *updateGolden {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("policy show differs from %s (run with -update after checking):\n%s", golden, got)
			}
		})
	}
}

func TestPolicyCheckVerb(t *testing.T) {
	root, ws := policyFixture(t)
	writeFile(t, filepath.Join(root, "etc/policy.toml"), goldenManaged)
	writeFile(t, filepath.Join(root, "home/.openoxide/config.toml"), goldenUser)
	tests := []struct {
		args     []string
		code     int
		contains []string
	}{
		{[]string{"--tool", "bash", "--input", "ls && rm -rf ~"}, exitFail, []string{"decision: deny", `rule: bash "rm *" deny  # ` + root + "/etc/policy.toml:7:", "patterns: ls *, rm *"}},
		{[]string{"--tool", "bash", "--input", "echo $(curl x)"}, exitAsk, []string{"decision: ask", `command "curl x": ask`}},
		{[]string{"--tool", "bash", "--input", "git commit -m wip"}, exitOK, []string{"decision: allow", "patterns: git commit *"}},
		{[]string{"--tool", "bash", "--input", "git status", "--agent", "plan"}, exitOK, []string{"decision: allow"}},
		{[]string{"--tool", "bash", "--input", "make", "--agent", "plan"}, exitFail, []string{"decision: deny", "default deny"}},
		{[]string{"--tool", "bash", "--input", "ls && rm x", "--json"}, exitFail, []string{`"action": "deny"`, `"patterns": [`, `"command": "rm x"`}},
		{[]string{"--tool", "bash"}, exitUsage, nil},
		{[]string{"--tool", "bash", "--input", "x", "--yolo"}, exitFail, []string{"flag --yolo: ", "full-access"}},
		{[]string{"--help"}, exitOK, []string{"--tool"}},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		args := append([]string{"policy", "check", "--workspace", ws}, tt.args...)
		code := dispatch(args, streams{strings.NewReader(""), &out, &errb})
		if code != tt.code {
			t.Errorf("%v: exit %d, want %d (stderr %s)", tt.args, code, tt.code, errb.String())
		}
		all := out.String() + errb.String()
		for _, c := range tt.contains {
			if !strings.Contains(all, c) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, c, all)
			}
		}
	}
}

func TestPolicyVerbErrors(t *testing.T) {
	root, ws := policyFixture(t)
	cfg := filepath.Join(root, "home/.openoxide/config.toml")
	writeFile(t, cfg, "[sandbox]\nmode = \"sideways\"\n")
	var out, errb bytes.Buffer
	code := dispatch([]string{"policy", "show", "--workspace", ws}, streams{strings.NewReader(""), &out, &errb})
	if code != exitFail || !strings.Contains(errb.String(), cfg+":2:8: bad value for sandbox.mode") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	for _, args := range [][]string{{"policy"}, {"policy", "nope"}, {"policy", "show", "extra"}} {
		if code := dispatch(args, streams{strings.NewReader(""), &out, &errb}); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestPolicyCheckDoesNotWalk: deep below the workspace (a writable root)
// sits a protected name that is a dangling symlink, which the scan of a
// session's bind step refuses. `policy check` and `policy show` still
// answer, so neither walked the workspace; `policy show --bind` does walk
// and fails on it.
func TestPolicyCheckDoesNotWalk(t *testing.T) {
	root, ws := policyFixture(t)
	writeFile(t, filepath.Join(root, "etc/policy.toml"), goldenManaged)
	deep := filepath.Join(ws, "a/b/c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(deep, ".claude")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"check", "--tool", "bash", "--input", "rm -rf x"}, exitFail, "decision: deny"},
		{[]string{"check", "--tool", "bash", "--input", "git status"}, exitAsk, "decision: ask"},
		{[]string{"show"}, exitOK, "sandbox.mode = "},
		{[]string{"show", "--bind"}, exitFail, deep + "/.claude: protected name is a dangling symlink"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		args := append([]string{"policy", tt.args[0], "--workspace", ws}, tt.args[1:]...)
		code := dispatch(args, streams{strings.NewReader(""), &out, &errb})
		if code != tt.code || !strings.Contains(out.String()+errb.String(), tt.contains) {
			t.Errorf("%v: exit %d (want %d), output lacks %q:\n%s%s", tt.args, code, tt.code, tt.contains, out.String(), errb.String())
		}
	}
}
