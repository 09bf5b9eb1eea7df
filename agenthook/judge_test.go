package agenthook

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/policy"
)

// argvDumpEnv makes the test binary a stand-in for oxsupervise that
// writes its arguments as JSON to the file the variable names.
const argvDumpEnv = "AGENTHOOK_TEST_ARGV_DUMP"

func TestMain(m *testing.M) {
	if out := os.Getenv(argvDumpEnv); out != "" {
		b, _ := json.Marshal(os.Args[1:])
		if err := os.WriteFile(out, b, 0o600); err != nil {
			os.Exit(99)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testPerms() *policy.Permissions {
	return &policy.Permissions{
		Default: policy.ActionAsk,
		Rules: []policy.PermissionRule{
			{Tool: "bash", Pattern: "npm *", Action: policy.ActionAllow, Source: "/home/user/.openoxide/config.toml:7:1"},
			{Tool: "bash", Pattern: "cargo *", Action: policy.ActionAllow, Source: "/home/user/.openoxide/config.toml:11:1"},
			{Tool: "bash", Pattern: "rm *", Action: policy.ActionDeny, Source: "/etc/oxsupervise/policy.toml:3:1"},
			{Tool: "write", Pattern: "**/.env*", Action: policy.ActionDeny, Source: "/etc/oxsupervise/policy.toml:8:1"},
			{Tool: "edit", Pattern: "src/**", Action: policy.ActionAllow, Source: "ws/.openoxide/config.toml:2:1"},
		},
	}
}

func readSample(t *testing.T, name string) *PreToolUse {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, err := Parse(f)
	if err != nil {
		t.Fatalf("Parse %s: %v", name, err)
	}
	return in
}

// withCommand returns a copy of in whose shell command is cmd.
func withCommand(t *testing.T, in *PreToolUse, cmd string) *PreToolUse {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(in.ToolInput, &fields); err != nil {
		t.Fatal(err)
	}
	fields["command"], _ = json.Marshal(cmd)
	out := *in
	out.ToolInput, _ = json.Marshal(fields)
	return &out
}

type wantAnswer struct {
	decision  string // permissionDecision; "" = no output at all
	reason    string // a piece of permissionDecisionReason
	rewritten bool   // updatedInput carries the nested command
}

func TestJudgeSamples(t *testing.T) {
	const exe = "/usr/bin/oxsupervise"
	for _, tc := range []struct {
		name, sample, command string
		agent                 Agent
		nest                  bool
		want                  wantAnswer
	}{
		{name: "claude allowed command nested", sample: "claude-code-bash.json", agent: ClaudeCode, nest: true,
			want: wantAnswer{decision: "allow", reason: `pattern = "npm *"`, rewritten: true}},
		{name: "claude allowed command outside a session", sample: "claude-code-bash.json", agent: ClaudeCode,
			want: wantAnswer{decision: "allow", reason: "config.toml:7:1"}},
		{name: "claude denied command", sample: "claude-code-bash.json", command: "npm test && rm -rf ~", agent: ClaudeCode, nest: true,
			want: wantAnswer{decision: "deny", reason: `pattern = "rm *", action = "deny"} at /etc/oxsupervise/policy.toml:3:1 (matched "rm -rf ~")`}},
		{name: "claude unmatched command asks, nested", sample: "claude-code-bash.json", command: "curl https://example.com", agent: ClaudeCode, nest: true,
			want: wantAnswer{decision: "ask", reason: "no rule matched; default ask", rewritten: true}},
		{name: "claude denied write", sample: "claude-code-write.json", agent: ClaudeCode, nest: true,
			want: wantAnswer{decision: "deny", reason: `pattern = "**/.env*"`}},
		{name: "codex allowed command nested", sample: "codex-bash.json", agent: Codex, nest: true,
			want: wantAnswer{decision: "allow", reason: `pattern = "cargo *"`, rewritten: true}},
		{name: "codex allowed command outside a session says nothing", sample: "codex-bash.json", agent: Codex},
		{name: "codex ask becomes a deny", sample: "codex-bash.json", command: "make deploy", agent: Codex, nest: true,
			want: wantAnswer{decision: "deny", reason: "Codex hooks cannot ask"}},
		{name: "codex denied command", sample: "codex-bash.json", command: "rm -rf target", agent: Codex, nest: true,
			want: wantAnswer{decision: "deny", reason: "policy.toml:3:1"}},
		{name: "codex patch into .git/hooks asks, so is refused", sample: "codex-apply-patch.json", agent: Codex, nest: true,
			want: wantAnswer{decision: "deny", reason: "for .git/hooks/pre-commit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := readSample(t, tc.sample)
			if tc.command != "" {
				in = withCommand(t, in, tc.command)
			}
			a, err := Judge(in, testPerms(), Options{Agent: tc.agent, Nest: tc.nest, Exe: exe})
			if err != nil {
				t.Fatalf("Judge: %v", err)
			}
			if tc.want.decision == "" {
				if len(a.Stdout) != 0 {
					t.Fatalf("answer %s, want no output", a.Stdout)
				}
				return
			}
			var out struct {
				HookSpecificOutput struct {
					HookEventName            string                     `json:"hookEventName"`
					PermissionDecision       string                     `json:"permissionDecision"`
					PermissionDecisionReason string                     `json:"permissionDecisionReason"`
					UpdatedInput             map[string]json.RawMessage `json:"updatedInput"`
				} `json:"hookSpecificOutput"`
			}
			dec := json.NewDecoder(strings.NewReader(string(a.Stdout)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&out); err != nil {
				t.Fatalf("answer %s: %v", a.Stdout, err)
			}
			h := out.HookSpecificOutput
			if h.HookEventName != "PreToolUse" || h.PermissionDecision != tc.want.decision {
				t.Errorf("answer %s, want PreToolUse %s", a.Stdout, tc.want.decision)
			}
			if !strings.Contains(h.PermissionDecisionReason, tc.want.reason) {
				t.Errorf("reason %q lacks %q", h.PermissionDecisionReason, tc.want.reason)
			}
			if !tc.want.rewritten {
				if h.UpdatedInput != nil {
					t.Errorf("updatedInput %v, want none", h.UpdatedInput)
				}
				return
			}
			call, _ := in.Call()
			var got string
			if err := json.Unmarshal(h.UpdatedInput["command"], &got); err != nil {
				t.Fatalf("updatedInput.command: %v", err)
			}
			if want := NestedCommand(exe, tc.agent, call.Command); got != want {
				t.Errorf("rewritten command %q, want %q", got, want)
			}
			// Claude Code replaces the whole input: every other field stays.
			var orig map[string]json.RawMessage
			_ = json.Unmarshal(in.ToolInput, &orig)
			if tc.agent == Codex {
				orig = map[string]json.RawMessage{"command": nil}
			}
			for k := range orig {
				if _, ok := h.UpdatedInput[k]; !ok {
					t.Errorf("updatedInput lost %q", k)
				} else if k != "command" && string(h.UpdatedInput[k]) != string(orig[k]) {
					t.Errorf("updatedInput %q = %s, want %s", k, h.UpdatedInput[k], orig[k])
				}
			}
			if len(h.UpdatedInput) != len(orig) {
				t.Errorf("updatedInput has fields %v, want those of %v", h.UpdatedInput, orig)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"not json", "hello", "invalid character"},
		{"another event", `{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{}}`, "want PreToolUse"},
		{"no tool", `{"hook_event_name":"PreToolUse","tool_input":{}}`, "no tool_name"},
		{"input not an object", `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":"ls"}`, "not an object"},
	} {
		_, err := Parse(strings.NewReader(tc.input))
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrBadInput naming %q", tc.name, err, tc.want)
		}
	}
	in := &PreToolUse{HookEventName: "PreToolUse", ToolName: "Bash", ToolInput: json.RawMessage(`{"command": 3}`)}
	if _, err := Judge(in, testPerms(), Options{Agent: ClaudeCode}); !errors.Is(err, ErrBadInput) {
		t.Errorf("Bash with a numeric command: error %v, want ErrBadInput", err)
	}
}

// TestNestedCommandHostile runs the rewritten command line through a real
// bash, with the test binary standing in for oxsupervise, and checks that
// the command arrives as one argument, byte for byte.
func TestNestedCommandHostile(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is needed to check the quoting: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// A path with a space and a quote, as the executable might have.
	odd := filepath.Join(dir, "ox super'vise")
	if err := os.Symlink(exe, odd); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{
		"npm test",
		`echo 'single' "double" \back\slash`,
		"echo $(id -u) `whoami` $HOME ${PATH:0:3}",
		"printf 'a\nb'\nsecond line; third && fourth || fifth",
		`it's "quoted" '' "" '\''`,
		"cat <<'EOF'\n$literal 'x'\nEOF",
		"x=1; for i in *; do echo \"$i\"; done & wait",
		"echo \t tabs   and   spaces ",
		"-n",
		"",
		"echo ünïcødé ☃ \x01\x7f",
	} {
		dump := filepath.Join(dir, "argv.json")
		line := NestedCommand(odd, ClaudeCode, cmd)
		c := exec.Command(bash, "-c", line)
		c.Env = append(os.Environ(), argvDumpEnv+"="+dump)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("bash -c %q: %v\n%s", line, err, out)
		}
		b, err := os.ReadFile(dump)
		if err != nil {
			t.Fatalf("%q: the stand-in did not run: %v", line, err)
		}
		var argv []string
		if err := json.Unmarshal(b, &argv); err != nil {
			t.Fatal(err)
		}
		want := []string{"run", TierFlag, "--agent=claude-code", "--", "bash", "-c", cmd}
		if !slices.Equal(argv, want) {
			t.Errorf("command %q: the nested run got %q, want %q", cmd, argv, want)
		}
		os.Remove(dump)
	}
}
