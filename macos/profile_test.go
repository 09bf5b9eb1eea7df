package macos

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/policy"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/macos")

const testSession = "s-20261130-abc123"

// defaultPatterns mirrors DESIGN §2's default protected set in the
// escalation form of protect_git.
func defaultPatterns() []policy.ProtectedPattern {
	var out []policy.ProtectedPattern
	add := func(t policy.EntryType, comps ...string) {
		out = append(out, policy.ProtectedPattern{Components: comps, Type: t, Source: "default"})
	}
	for _, sub := range [][]string{{"hooks"}, {"config"}, {"config.worktree"}, {"commondir"}, {"info"},
		{"modules", "*", "hooks"}, {"modules", "*", "config"}, {"worktrees", "*", "hooks"}, {"worktrees", "*", "config"}} {
		add(policy.EntryAny, append([]string{".git"}, sub...)...)
	}
	add(policy.EntryFile, ".git")
	for _, d := range []string{".openoxide", ".codex", ".agents", ".claude", ".cursor", ".vscode", ".idea"} {
		add(policy.EntryDir, d)
	}
	for _, f := range []string{".mcp.json", ".envrc", ".gitmodules", "AGENTS.md", "CLAUDE.md", "CONTEXT.md"} {
		add(policy.EntryFile, f)
	}
	return out
}

func dir(p string) policy.Anchor {
	return policy.Anchor{Path: p, Dir: true, Exists: true, Source: "test"}
}

func workspaceWrite() *policy.Compiled {
	return &policy.Compiled{
		SchemaVersion:     policy.CompiledSchemaVersion,
		Mode:              policy.ModeWorkspaceWrite,
		Workspace:         dir("/Users/dev/src/app"),
		WritableRoots:     []policy.Anchor{dir("/Users/dev/src/app"), dir("/private/tmp"), dir("/private/var/folders/xy/T")},
		FilesystemRules:   true,
		ReadAccess:        policy.ReadAccessFull,
		ProtectedPatterns: defaultPatterns(),
		ProtectedPaths: []policy.Anchor{
			dir("/Users/dev/src/app/.git/hooks"),
			dir("/Users/dev/src/app/vendor/lib/.git/hooks"),
		},
		DenyRead: []policy.Anchor{
			dir("/Users/dev/.ssh"),
			dir("/Users/dev/.aws"),
			{Path: "/Users/dev/.netrc", Exists: false, Source: "default"},
		},
		DenyReadGlobs: []policy.NameGlob{{Within: "/Users/dev/src/app", Include: ".env*", Exclude: []string{".env.example"}, Source: "default"}},
		Network:       policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackNone},
	}
}

func TestGenerateGolden(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *policy.Compiled)
		opts   Options
	}{
		{name: "workspace-write-net-none", mutate: func(*policy.Compiled) {}},
		{name: "read-only-restricted", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeReadOnly
			c.WritableRoots = nil
			c.ReadAccess = policy.ReadAccessRestricted
			c.ReadableRoots = []policy.Anchor{dir("/Users/dev/src/app"), dir("/Users/dev/.cache/go-build")}
		}},
		{name: "read-only-full-read", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeReadOnly
			c.WritableRoots = nil
		}},
		{name: "workspace-write-net-full-loopback-all", mutate: func(c *policy.Compiled) {
			c.Network = policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackAll, AllowUnixSockets: []string{"/Users/dev/.colima/docker.sock"}}
		}},
		{name: "workspace-write-allowlist-proxy", opts: Options{ProxyPort: 53053}, mutate: func(c *policy.Compiled) {
			c.Network = policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackSession,
				Allow: []policy.NetRule{{Host: "github.com"}}}
		}},
		{name: "workspace-write-protect-git-all", mutate: func(c *policy.Compiled) {
			c.ProtectedPatterns = []policy.ProtectedPattern{{Components: []string{".git"}, Type: policy.EntryAny, Source: "protect_git=all"}}
			c.ProtectedPaths = []policy.Anchor{dir("/Users/dev/src/app/.git")}
		}},
		{name: "external-sandbox-net-none", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeExternalSandbox
			c.FilesystemRules = false
		}},
		{name: "external-sandbox-allowlist-loopback-all", opts: Options{ProxyPort: 3128}, mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeExternalSandbox
			c.FilesystemRules = false
			c.Network = policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackAll}
		}},
		{name: "external-sandbox-net-full", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeExternalSandbox
			c.FilesystemRules = false
			c.Network = policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackAll}
		}},
		{name: "awkward-paths", mutate: func(c *policy.Compiled) {
			c.WritableRoots = []policy.Anchor{
				dir(`/Users/dev/My Projects/a "quoted" (paren) dir`),
				dir(`/Users/dev/back\slash/x") (allow default) ;`),
				dir("/Users/dev/Über/日本語/café"),
			}
			c.ProtectedPatterns = []policy.ProtectedPattern{
				{Components: []string{"weird name (v2)"}, Type: policy.EntryDir, Source: "test"},
				{Components: []string{"a.b+c*[d]{e}|f^$?", "ñ"}, Type: policy.EntryAny, Source: "test"},
			}
			c.ProtectedPaths = nil
			c.DenyRead = []policy.Anchor{dir(`/Users/dev/secret "stuff")`)}
			c.DenyReadGlobs = []policy.NameGlob{{Within: `/Users/dev/My Projects/a "quoted" (paren) dir`, Include: "*.pem", Source: "test"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := workspaceWrite()
			tt.mutate(c)
			opts := tt.opts
			opts.SessionID = testSession
			prof, err := Generate(c, opts)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			checkWellFormed(t, prof.Text)
			checkNoPathsInText(t, c, prof)
			checkParamsReferenced(t, prof)
			got := renderGolden(prof)
			file := filepath.Join("..", "testdata", "macos", tt.name+".golden")
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("read golden (run go test ./macos -update to create): %v", err)
			}
			if got != string(want) {
				t.Errorf("profile differs from %s (run with -update after reviewing):\n%s", file, diffLines(string(want), got))
			}
		})
	}
}

func renderGolden(p *Profile) string {
	var b strings.Builder
	b.WriteString(p.Text)
	b.WriteString(";; ---- params\n")
	for _, prm := range p.Params {
		fmt.Fprintf(&b, ";; %s=%q\n", prm.Key, prm.Value)
	}
	b.WriteString(";; ---- warnings\n")
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, ";; %s\n", w)
	}
	return b.String()
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}

// checkNoPathsInText asserts that no policy path reached the profile text:
// they must travel only as parameters.
func checkNoPathsInText(t *testing.T, c *policy.Compiled, p *Profile) {
	t.Helper()
	var paths []string
	for _, a := range c.WritableRoots {
		paths = append(paths, a.Path)
	}
	for _, a := range c.DenyRead {
		paths = append(paths, a.Path)
	}
	for _, a := range c.ProtectedPaths {
		paths = append(paths, a.Path)
	}
	for _, a := range c.ReadableRoots {
		paths = append(paths, a.Path)
	}
	for _, g := range c.DenyReadGlobs {
		paths = append(paths, g.Within)
	}
	for _, s := range c.Network.AllowUnixSockets {
		paths = append(paths, s)
	}
	for _, path := range paths {
		if strings.Contains(p.Text, path) {
			t.Errorf("profile text contains policy path %q; it must be a -D parameter", path)
		}
		found := false
		for _, prm := range p.Params {
			if prm.Value == path {
				found = true
			}
		}
		if !found && p.Text != "" && c.FilesystemRules {
			t.Errorf("path %q is not passed as a parameter", path)
		}
	}
}

// checkParamsReferenced asserts every parameter is read by the profile and
// every (param "X") has a value, since sandbox-exec refuses (or worse,
// reads as empty) an unknown parameter.
func checkParamsReferenced(t *testing.T, p *Profile) {
	t.Helper()
	keys := map[string]bool{}
	for _, prm := range p.Params {
		if keys[prm.Key] {
			t.Errorf("duplicate parameter key %s", prm.Key)
		}
		keys[prm.Key] = true
		if !strings.Contains(p.Text, `(param "`+prm.Key+`")`) {
			t.Errorf("parameter %s is never referenced", prm.Key)
		}
	}
	rest := p.Text
	for {
		i := strings.Index(rest, `(param "`)
		if i < 0 {
			break
		}
		rest = rest[i+len(`(param "`):]
		key := rest[:strings.IndexByte(rest, '"')]
		if !keys[key] {
			t.Errorf("profile reads undefined parameter %s", key)
		}
	}
}

// checkWellFormed parses the profile as S-expressions the way SBPL's
// reader does (strings with backslash escapes, #"..." raw regex strings,
// ; comments) and requires balanced parentheses and known top-level forms.
// It guards against any policy text closing a string or list early.
func checkWellFormed(t *testing.T, text string) {
	t.Helper()
	depth, top := 0, 0
	for i := 0; i < len(text); i++ {
		switch ch := text[i]; {
		case ch == ';':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case ch == '#' && i+1 < len(text) && text[i+1] == '"':
			end := strings.IndexByte(text[i+2:], '"')
			if end < 0 {
				t.Fatalf("unterminated regex literal at byte %d", i)
			}
			if nl := strings.IndexByte(text[i+2:i+2+end], '\n'); nl >= 0 {
				t.Fatalf("newline inside regex literal at byte %d", i)
			}
			i += 2 + end
		case ch == '"':
			j := i + 1
			for ; j < len(text) && text[j] != '"'; j++ {
				if text[j] == '\\' {
					j++
				}
			}
			if j >= len(text) {
				t.Fatalf("unterminated string at byte %d", i)
			}
			i = j
		case ch == '(':
			if depth == 0 {
				top++
				rest := text[i+1:]
				if !(strings.HasPrefix(rest, "version ") || strings.HasPrefix(rest, "allow ") || strings.HasPrefix(rest, "deny ")) {
					t.Fatalf("unexpected top-level form at byte %d: %.30q", i, rest)
				}
			}
			depth++
		case ch == ')':
			depth--
			if depth < 0 {
				t.Fatalf("unbalanced ')' at byte %d", i)
			}
		}
	}
	if depth != 0 {
		t.Fatalf("unbalanced parentheses: depth %d at end", depth)
	}
	if top < 2 {
		t.Fatalf("profile has %d top-level forms", top)
	}
	if !strings.Contains(text, "(version 1)") {
		t.Fatal("profile lacks (version 1)")
	}
}

func TestGenerateFullAccessIsUnsandboxed(t *testing.T) {
	c := workspaceWrite()
	c.Mode = policy.ModeFullAccess
	c.FilesystemRules = false
	c.Network = policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackAll}
	prof, err := Generate(c, Options{SessionID: testSession})
	if err != nil {
		t.Fatal(err)
	}
	if !prof.Unsandboxed || prof.Text != "" || len(prof.Warnings) == 0 {
		t.Fatalf("full-access: got Unsandboxed=%v text=%q warnings=%v; want unsandboxed, no text, a warning", prof.Unsandboxed, prof.Text, prof.Warnings)
	}
}

func TestGenerateRefuses(t *testing.T) {
	tests := []struct {
		name     string
		session  string
		mutate   func(c *policy.Compiled)
		want     string
		sentinel error
	}{
		{name: "bad session id", session: `x") (allow default`, mutate: func(*policy.Compiled) {}, want: "session id"},
		{name: "empty session id", session: "", mutate: func(*policy.Compiled) {}, want: "session id"},
		{name: "quote in pattern", mutate: func(c *policy.Compiled) {
			c.ProtectedPatterns = []policy.ProtectedPattern{{Components: []string{`a"b`}}}
		}, want: "cannot be placed safely"},
		{name: "backslash in pattern", mutate: func(c *policy.Compiled) {
			c.ProtectedPatterns = []policy.ProtectedPattern{{Components: []string{`a\b`}}}
		}, want: "cannot be placed safely"},
		{name: "newline in pattern", mutate: func(c *policy.Compiled) {
			c.ProtectedPatterns = []policy.ProtectedPattern{{Components: []string{"a\nb"}}}
		}, want: "control character"},
		{name: "slash in pattern", mutate: func(c *policy.Compiled) {
			c.ProtectedPatterns = []policy.ProtectedPattern{{Components: []string{"a/b"}}}
		}, want: "contains '/'"},
		{name: "dotdot in pattern", mutate: func(c *policy.Compiled) {
			c.ProtectedPatterns = []policy.ProtectedPattern{{Components: []string{".."}}}
		}, want: "not a file name"},
		{name: "invalid utf8 in pattern", mutate: func(c *policy.Compiled) {
			c.ProtectedPatterns = []policy.ProtectedPattern{{Components: []string{"a\xffb"}}}
		}, want: "UTF-8"},
		{name: "empty pattern", mutate: func(c *policy.Compiled) {
			c.ProtectedPatterns = []policy.ProtectedPattern{{}}
		}, want: "no components"},
		{name: "bracket glob", mutate: func(c *policy.Compiled) {
			c.DenyReadGlobs = []policy.NameGlob{{Within: "/x", Include: ".env[0-9]"}}
		}, want: "bracket classes"},
		{name: "relative root", mutate: func(c *policy.Compiled) {
			c.WritableRoots = []policy.Anchor{{Path: "src"}}
		}, want: "not an absolute path"},
		{name: "nul in deny read", mutate: func(c *policy.Compiled) {
			c.DenyRead = []policy.Anchor{{Path: "/a\x00b"}}
		}, want: "NUL"},
		{name: "allowlist without proxy", mutate: func(c *policy.Compiled) {
			c.Network.Policy = policy.NetAllowlist
		}, want: "proxy port", sentinel: ErrUnsupportedPolicy},
		{name: "external allowlist without proxy", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeExternalSandbox
			c.FilesystemRules = false
			c.Network.Policy = policy.NetAllowlist
		}, want: "proxy port", sentinel: ErrUnsupportedPolicy},
		{name: "unknown mode", mutate: func(c *policy.Compiled) { c.Mode = "yolo" }, want: "unknown mode"},
		{name: "unknown network", mutate: func(c *policy.Compiled) { c.Network.Policy = "some" }, want: "unknown network policy"},
		{name: "unknown read access", mutate: func(c *policy.Compiled) { c.ReadAccess = "partial" }, want: "unknown read access"},
		{name: "read-only with roots", mutate: func(c *policy.Compiled) { c.Mode = policy.ModeReadOnly }, want: "inconsistent"},
		{name: "workspace-write without fs rules", mutate: func(c *policy.Compiled) { c.FilesystemRules = false }, want: "inconsistent"},
		{name: "unknown entry type", mutate: func(c *policy.Compiled) {
			c.ProtectedPatterns = []policy.ProtectedPattern{{Components: []string{"x"}, Type: "socket"}}
		}, want: "unknown entry type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := workspaceWrite()
			tt.mutate(c)
			session := tt.session
			if session == "" && tt.name != "empty session id" {
				session = testSession
			}
			prof, err := Generate(c, Options{SessionID: session})
			if err == nil {
				t.Fatalf("Generate succeeded, want error containing %q; profile:\n%s", tt.want, prof.Text)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Fatalf("error %q is not %v", err, tt.sentinel)
			}
		})
	}
}

func TestSandboxExecArgs(t *testing.T) {
	c := workspaceWrite()
	c.WritableRoots = []policy.Anchor{dir("/Users/dev/a=b c")}
	prof, err := Generate(c, Options{SessionID: testSession})
	if err != nil {
		t.Fatal(err)
	}
	args := prof.SandboxExecArgs([]string{"-rf", "x y"})
	if args[0] != "-p" || args[1] != prof.Text {
		t.Fatalf("args start %q, want -p PROFILE", args[:2])
	}
	n := len(args)
	if args[n-3] != "--" || args[n-2] != "-rf" || args[n-1] != "x y" {
		t.Fatalf("args end %q, want -- -rf \"x y\"", args[n-3:])
	}
	var sawRoot bool
	for i := 2; i < n-3; i += 2 {
		if args[i] != "-D" {
			t.Fatalf("arg %d = %q, want -D", i, args[i])
		}
		if args[i+1] == "WRITABLE_ROOT_0=/Users/dev/a=b c" {
			sawRoot = true
		}
	}
	if !sawRoot {
		t.Fatalf("writable root parameter missing from %q", args)
	}
}

func TestComponentRegex(t *testing.T) {
	tests := []struct{ in, want string }{
		{".git", `\.git`},
		{"a+b", `a\+b`},
		{"x(1)[2]{3}", `x\(1\)\[2\]\{3\}`},
		{"^$|?*", `\^\$\|\?\*`},
		{"café", "café"},
		{"with space", "with space"},
	}
	for _, tt := range tests {
		got, err := componentRegex(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("componentRegex(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestGlobRegex(t *testing.T) {
	tests := []struct{ in, want string }{
		{".env*", `\.env[^/]*`},
		{"id_?sa", `id_[^/]sa`},
		{"*.pem", `[^/]*\.pem`},
	}
	for _, tt := range tests {
		got, err := globRegex(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("globRegex(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestNetworkRules checks the network decisions of each setting directly,
// independent of the golden files.
func TestNetworkRules(t *testing.T) {
	tests := []struct {
		name     string
		net      policy.Network
		port     uint16
		want     []string
		wantNot  []string
		warnings int
	}{
		{name: "none", net: policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackNone},
			wantNot: []string{`(remote ip "*:*")`, `(remote ip "localhost:`, "(allow network*)", `(local ip "*:*")`}},
		{name: "none loopback all", net: policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackAll},
			want: []string{`(allow network-outbound (remote ip "localhost:*"))`}, wantNot: []string{`(allow network-outbound (remote ip "*:*"))`}},
		{name: "allowlist via proxy", net: policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone}, port: 8443,
			want: []string{`(allow network-outbound (remote ip "localhost:8443"))`}, wantNot: []string{`(remote ip "*:*")`, `"localhost:*"`}, warnings: 1},
		{name: "full keeps unix sockets closed", net: policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackAll},
			want: []string{`(allow network-outbound (remote ip "*:*"))`}, wantNot: []string{"(allow network*)", `(deny network-outbound (remote ip "localhost:*")`}},
		{name: "full without loopback", net: policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackNone},
			want: []string{`(allow network-outbound (remote ip "*:*"))`, `(deny network-outbound (remote ip "localhost:*") (with message`}},
		{name: "loopback session fails closed", net: policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackSession},
			wantNot: []string{`(allow network-outbound (remote ip "localhost:*"))`}, warnings: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := workspaceWrite()
			c.Network = tt.net
			prof, err := Generate(c, Options{SessionID: testSession, ProxyPort: tt.port})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(prof.Text, w) {
					t.Errorf("profile lacks %s", w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(prof.Text, w) {
					t.Errorf("profile contains %s", w)
				}
			}
			if len(prof.Warnings) != tt.warnings {
				t.Errorf("warnings = %q, want %d", prof.Warnings, tt.warnings)
			}
		})
	}
}
