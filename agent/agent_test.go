package agent

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		argv    []string
		profile string
		at      int
	}{
		{[]string{"claude"}, "claude-code", 1},
		{[]string{"/opt/agents/node_modules/.bin/claude", "-p", "x"}, "claude-code", 1},
		{[]string{"codex", "exec", "hi"}, "codex", 1},
		{[]string{"opencode"}, "opencode", 1},
		{[]string{"aider", "--model", "x"}, "aider", 1},
		{[]string{"npx", "-y", "@openai/codex@0.171.0", "exec"}, "codex", 3},
		{[]string{"npx", "@anthropic-ai/claude-code"}, "claude-code", 2},
		{[]string{"node", "--no-warnings", "/x/node_modules/@openai/codex/bin/codex.js", "exec"}, "codex", 3},
		{[]string{"npx", "cowsay", "claude"}, "", 0},
		{[]string{"node", "script.js"}, "", 0},
		{[]string{"bash", "-c", "claude"}, "", 0},
		{nil, "", 0},
	} {
		p, at := Detect(tc.argv)
		got := ""
		if p != nil {
			got = p.Name
		}
		if got != tc.profile || at != tc.at {
			t.Errorf("Detect(%q) = %q at %d, want %q at %d", tc.argv, got, at, tc.profile, tc.at)
		}
	}
}

func TestHostPort(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string
		err  bool
	}{
		{"https://api.anthropic.com", []string{"api.anthropic.com:443"}, false},
		{"http://127.0.0.1:41719", []string{"127.0.0.1:41719"}, false},
		{"http://localhost:4000/v1", []string{"127.0.0.1:4000", "[::1]:4000"}, false},
		{"https://Gateway.Corp.example:8443/anthropic", []string{"gateway.corp.example:8443"}, false},
		{"http://[::1]:9000", []string{"[::1]:9000"}, false},
		{"http://gw", []string{"gw:80"}, false},
		{"ftp://x", nil, true},
		{"api.anthropic.com", nil, true},
	} {
		got, err := HostPort(tc.url)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("HostPort(%q) = %q, %v; want %q (error %v)", tc.url, got, err, tc.want, tc.err)
		}
	}
}

func grantValues(gs []Grant) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Value)
	}
	return out
}

// The endpoint follows the agent's own base-URL settings: a loopback
// stand-in is admitted as exactly its host:port, and the default provider
// host is then not admitted; every value names its source.
func TestGrantsFollowBaseURL(t *testing.T) {
	env := map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:5555"}
	p, _ := Lookup("claude-code")
	g, err := p.Grants(Inputs{Env: func(k string) string { return env[k] }, Home: "/home/u"})
	if err != nil {
		t.Fatal(err)
	}
	hosts := grantValues(g.NetAllow)
	if !slices.Contains(hosts, "127.0.0.1:5555") || slices.Contains(hosts, "api.anthropic.com:443") {
		t.Errorf("claude-code hosts with ANTHROPIC_BASE_URL: %q", hosts)
	}
	for _, gr := range append(append(g.NetAllow, g.Writable...), g.Passthrough...) {
		if !strings.HasPrefix(gr.Source, "profile claude-code (built in): ") || len(gr.Source) < len("profile claude-code (built in): x") {
			t.Errorf("grant %q has source %q, want the profile and a citation", gr.Value, gr.Source)
		}
	}
	if !slices.Contains(grantValues(g.Writable), "/home/u/.claude.json") || !g.WritableFiles["/home/u/.claude.json"] {
		t.Errorf("~/.claude.json not a writable file grant: %q %v", grantValues(g.Writable), g.WritableFiles)
	}
	if slices.Contains(grantValues(g.Writable), "/home/u/.claude") {
		t.Errorf("the whole of ~/.claude is writable (its settings and hooks are rules)")
	}

	// Without a base URL: the documented provider host.
	g, _ = p.Grants(Inputs{Home: "/home/u"})
	if hosts := grantValues(g.NetAllow); !slices.Contains(hosts, "api.anthropic.com:443") {
		t.Errorf("default claude-code hosts: %q", hosts)
	}
	if _, err := p.Grants(Inputs{Env: func(string) string { return "not a url" }}); err == nil {
		t.Errorf("a base URL without a scheme was accepted")
	}
}

func TestCodexEndpoints(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte("[model_providers.corp]\nbase_url = \"https://llm.corp.example/v1\"\n"), 0o600)
	p, _ := Lookup("codex")
	argv := []string{"codex", "-c", `model_providers.standin.base_url="http://127.0.0.1:7000/v1"`, "exec", "x"}
	g, err := p.Grants(Inputs{Argv: argv, Home: home, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	hosts := grantValues(g.NetAllow)
	for _, want := range []string{"127.0.0.1:7000", "llm.corp.example:443", "auth.openai.com:443"} {
		if !slices.Contains(hosts, want) {
			t.Errorf("codex hosts %q lack %s", hosts, want)
		}
	}
	if slices.Contains(hosts, "api.openai.com:443") {
		t.Errorf("codex with a custom provider also admits api.openai.com: %q", hosts)
	}
	g, _ = p.Grants(Inputs{Argv: []string{"codex"}, Home: home})
	if hosts := grantValues(g.NetAllow); !slices.Contains(hosts, "api.openai.com:443") || !slices.Contains(hosts, "chatgpt.com:443") {
		t.Errorf("default codex hosts: %q", hosts)
	}
}

func TestPrepare(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Prepare is Linux only")
	}
	home := t.TempDir()
	p, _ := Lookup("claude-code")
	made, err := p.Prepare(home, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".claude.json", ".claude/projects", ".claude/todos"} {
		if !slices.Contains(made, filepath.Join(home, want)) {
			t.Errorf("Prepare did not create ~/%s (made %q)", want, made)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".claude.json")); string(b) != "{}\n" {
		t.Errorf("new ~/.claude.json = %q", b)
	}
	if _, err := os.Stat(filepath.Join(home, ".claude", ".credentials.json")); !os.IsNotExist(err) {
		t.Errorf("Prepare created the credentials file (%v)", err)
	}
	if fi, err := os.Stat(filepath.Join(home, ".claude", "projects")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("~/.claude/projects: %v %v", fi, err)
	}
	// Idempotent.
	if made, err := p.Prepare(home, os.Getuid(), os.Getgid()); err != nil || len(made) != 0 {
		t.Errorf("second Prepare: made %q, %v", made, err)
	}

	// A symlink on the way is never followed.
	home2, elsewhere := t.TempDir(), t.TempDir()
	os.Symlink(elsewhere, filepath.Join(home2, ".claude"))
	if _, err := p.Prepare(home2, os.Getuid(), os.Getgid()); err == nil || !strings.Contains(err.Error(), "not followed") {
		t.Errorf("Prepare through a symlinked ~/.claude: %v", err)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("Prepare created %v through the symlink", entries)
	}
}

// A session may write Claude Code's state in ~/.claude.json but not the
// keys that start programs: those are put back, the rest is kept.
func TestGuardRollsBackProgramKeys(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("rollback is Linux only")
	}
	home := t.TempDir()
	path := filepath.Join(home, ".claude.json")
	os.WriteFile(path, []byte(`{"numStartups":1,"mcpServers":{"mine":{"command":"x"}},"projects":{"/w":{"allowedTools":[],"history":[]}}}`), 0o600)
	p, _ := Lookup("claude-code")
	snap := p.Snapshot(home)
	// The session: state changes, plus a new server and a project server.
	os.WriteFile(path, []byte(`{"numStartups":2,"mcpServers":{"mine":{"command":"x"},"evil":{"command":"/bin/sh"}},"projects":{"/w":{"allowedTools":[],"history":["a"]},"/other":{"mcpServers":{"e":{"command":"sh"}}}}}`), 0o600)
	rolled, err := snap.Restore(os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range rolled {
		keys = append(keys, r.Key)
	}
	slices.Sort(keys)
	if want := []string{"mcpServers", "projects//other/mcpServers"}; !slices.Equal(keys, want) {
		t.Errorf("rolled back %q, want %q", keys, want)
	}
	b, _ := os.ReadFile(path)
	s := string(b)
	if strings.Contains(s, "evil") || strings.Contains(s, `"e"`) || !strings.Contains(s, `"mine"`) {
		t.Errorf("after rollback: %s", s)
	}
	if !strings.Contains(s, `"numStartups": 2`) || !strings.Contains(s, `"a"`) {
		t.Errorf("the session's state was not kept: %s", s)
	}
	if again, err := p.Snapshot(home).Restore(os.Getuid()); err != nil || len(again) != 0 {
		t.Errorf("nothing changed, yet rolled back %v (%v)", again, err)
	}
	// Never rewrites a file another user owns.
	os.WriteFile(path, []byte(`{"mcpServers":{"x":{}}}`), 0o600)
	snap = p.Snapshot(home)
	os.WriteFile(path, []byte(`{"mcpServers":{"y":{}}}`), 0o600)
	if _, err := snap.Restore(os.Getuid() + 1); err == nil {
		t.Errorf("rolled back a file not owned by the session's user")
	}
}

// Every profile entry cites its source, and every profile has the
// documented switches the design requires.
func TestProfilesCite(t *testing.T) {
	for _, p := range All() {
		all := [][]Entry{p.Hosts, p.Credentials, p.Env, p.Args, p.State, p.Rules}
		for _, list := range all {
			for _, e := range list {
				if strings.TrimSpace(e.Cite) == "" {
					t.Errorf("%s: %q cites nothing", p.Name, e.Value)
				}
			}
		}
		if len(p.Commands) == 0 || len(p.Credentials) == 0 || len(p.State) == 0 || len(p.Rules) == 0 {
			t.Errorf("%s: incomplete profile", p.Name)
		}
		for _, e := range p.Env {
			if !strings.Contains(e.Value, "=") {
				t.Errorf("%s: env %q is not NAME=value", p.Name, e.Value)
			}
		}
	}
}

// Find reads the installed version from the agent's npm package, never by
// running it, and says whether the profile was checked against it.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	install := func(pkg, version, rel, cmd string) {
		root := filepath.Join(dir, "node_modules", pkg)
		os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(root, "package.json"), []byte(`{"name":"`+pkg+`","version":"`+version+`"}`), 0o644)
		os.WriteFile(filepath.Join(root, rel), []byte("#!/bin/false\n"), 0o755)
		os.MkdirAll(filepath.Join(dir, "node_modules", ".bin"), 0o755)
		os.Symlink(filepath.Join(root, rel), filepath.Join(dir, "node_modules", ".bin", cmd))
	}
	install("@anthropic-ai/claude-code", "2.1.197", "bin/claude.exe", "claude")
	install("@openai/codex", "9.9.9", "bin/codex.js", "codex")
	found := Find(filepath.Join(dir, "node_modules", ".bin") + string(os.PathListSeparator) + "/nonexistent")
	byName := map[string]Installed{}
	for _, in := range found {
		byName[in.Command] = in
	}
	if c := byName["claude"]; c.Version != "2.1.197" || !c.Checked || c.Profile != "claude-code" {
		t.Errorf("claude: %+v", c)
	}
	if c := byName["codex"]; c.Version != "9.9.9" || c.Checked || !strings.Contains(c.Note, "checked against 0.171.0") {
		t.Errorf("codex: %+v", c)
	}
	if _, ok := byName["aider"]; ok || len(found) != 2 {
		t.Errorf("found %+v", found)
	}
}
