package policy

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// loadAgent loads the fixture's policy for a session running argv.
func (f *fixture) loadAgent(t *testing.T, argv []string, args ...string) (*Compiled, *Effective, string, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fl := RegisterFlags(fs)
	RegisterAgentFlag(fs, fl)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse flags %v: %v", args, err)
	}
	var warn bytes.Buffer
	c, e, err := Load(LoadOptions{
		ManagedDir: f.managed, Home: f.home, Workspace: f.ws, Flags: fl,
		Env: func(k string) string { return f.env[k] }, Warn: &warn,
		Argv: argv, AgentState: &AgentOwner{UID: os.Getuid(), GID: os.Getgid()},
	})
	return c, e, warn.String(), err
}

func allowHosts(c *Compiled) []string {
	var out []string
	for _, r := range c.Network.Allow {
		if r.Host != "" {
			out = append(out, r.Host)
		} else {
			out = append(out, r.Prefix.String())
		}
	}
	return out
}

func allowSource(c *Compiled, host string) string {
	for _, r := range c.Network.Allow {
		if r.Host == host || r.Prefix.String() == host {
			return r.Source
		}
	}
	return ""
}

// `run -- claude` with nothing configured but ANTHROPIC_BASE_URL: the
// profile admits exactly the base URL's address and port, passes the
// credentials, sets the agent's switches, makes its state writable and
// says where each value came from.
func TestAgentProfileApplied(t *testing.T) {
	f := newFixture(t)
	f.env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:5555"
	c, eff, _, err := f.loadAgent(t, []string{"claude", "-p", "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent == nil || c.Agent.Name != "claude-code" || c.Agent.Source != "detected from the command claude" {
		t.Fatalf("agent profile %+v", c.Agent)
	}
	if c.Network.Policy != NetAllowlist || c.Network.Loopback != LoopbackSession {
		t.Errorf("network %s loopback %s, want allowlist and loopback unchanged", c.Network.Policy, c.Network.Loopback)
	}
	hosts := allowHosts(c)
	if !slices.Contains(hosts, "127.0.0.1/32") || slices.Contains(hosts, "api.anthropic.com") {
		t.Errorf("allow %q, want the stand-in and not the default API host", hosts)
	}
	for _, r := range c.Network.Allow {
		if r.Prefix.String() == "127.0.0.1/32" && (len(r.Ports) != 1 || r.Ports[0].First != 5555 || r.Ports[0].Last != 5555) {
			t.Errorf("loopback base URL admitted on ports %v, want 5555 only", r.Ports)
		}
	}
	if src := allowSource(c, "127.0.0.1/32"); !strings.HasPrefix(src, "profile claude-code (built in): ") || !strings.Contains(src, "ANTHROPIC_BASE_URL") {
		t.Errorf("source of the API entry: %q", src)
	}
	if !slices.Contains(c.Env.Passthrough, "ANTHROPIC_API_KEY") || !slices.Contains(c.Env.Set, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1") {
		t.Errorf("env %+v", c.Env)
	}
	roots := paths(c.WritableRoots)
	for _, want := range []string{f.home + "/.claude.json", f.home + "/.claude/projects"} {
		if !slices.Contains(roots, want) {
			t.Errorf("writable roots %q lack %s", roots, want)
		}
	}
	if slices.Contains(roots, f.home+"/.claude") || slices.Contains(roots, f.home) {
		t.Errorf("writable roots %q include ~/.claude or ~ (rules live there)", roots)
	}
	if got := c.CommandLine([]string{"claude", "-p", "hi"}); !slices.Equal(got, []string{"claude", "--settings", `{"sandbox":{"enabled":false}}`, "-p", "hi"}) {
		t.Errorf("command line %q", got)
	}
	if v, ok := effValue(eff, "agent.profile"); !ok || v.Value != "claude-code" {
		t.Errorf("policy show lacks agent.profile: %+v", v)
	}
	if v, ok := effValue(eff, "network.policy"); !ok || v.Source != "profile claude-code (built in)" {
		t.Errorf("network.policy source %+v", v)
	}
}

func TestAgentProfileChoice(t *testing.T) {
	for _, tc := range []struct {
		name    string
		argv    []string
		flags   []string
		file    string
		profile string
		err     string
	}{
		{name: "not an agent", argv: []string{"bash"}},
		{name: "named", argv: []string{"my-wrapper"}, flags: []string{"--agent", "codex"}, profile: "codex"},
		// policy show --agent NAME, with no command at all.
		{name: "named without a command", flags: []string{"--agent", "claude-code"}, profile: "claude-code"},
		{name: "none", argv: []string{"claude"}, flags: []string{"--agent", "none"}},
		{name: "unknown", argv: []string{"claude"}, flags: []string{"--agent", "claud"}, err: `flag --agent: no built-in agent profile "claud"`},
		{name: "disabled in a file", argv: []string{"claude"}, file: "[agent.claude-code.profile]\nenabled = false\n"},
		{name: "unknown key", argv: []string{"claude"}, file: "[agent.claude-code.profile]\nhosts = []\n", err: "config.toml:2:1: unknown key agent.claude-code.profile.hosts"},
		{name: "unknown profile", argv: []string{"claude"}, file: "[agent.claud.profile]\nenabled = false\n", err: `no built-in agent profile "claud"`},
		{name: "permission overrides still decode", argv: []string{"claude"}, file: "[agent.build.permission]\ndefault = \"deny\"\n", profile: "claude-code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.file != "" {
				f.write(t, "home/.openoxide/config.toml", tc.file)
			}
			c, _, _, err := f.loadAgent(t, tc.argv, tc.flags...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if c.Agent != nil {
				got = c.Agent.Name
			}
			if got != tc.profile {
				t.Errorf("profile %q, want %q", got, tc.profile)
			}
			if tc.profile == "" && c.Network.Policy != NetNone {
				t.Errorf("no profile, yet network %s", c.Network.Policy)
			}
			if tc.name == "named" && len(c.Agent.Args) != 0 {
				t.Errorf("switches %q added to a command that is not the agent", c.Agent.Args)
			}
		})
	}
}

// Overrides in the files add to the profile, with their file:line.
func TestAgentProfileOverride(t *testing.T) {
	f := newFixture(t)
	f.write(t, "home/.openoxide/config.toml", "[agent.claude-code.profile]\nallow = [\"proxy.corp.example:3128\"]\npassthrough = [\"CORP_GATEWAY_KEY\"]\n")
	c, _, _, err := f.loadAgent(t, []string{"claude"})
	if err != nil {
		t.Fatal(err)
	}
	if src := allowSource(c, "proxy.corp.example"); !strings.Contains(src, "config.toml:2:") {
		t.Errorf("override entry source %q (allow %q)", src, allowHosts(c))
	}
	if !slices.Contains(c.Env.Passthrough, "CORP_GATEWAY_KEY") {
		t.Errorf("passthrough %q", c.Env.Passthrough)
	}
}

// A managed lock wins over the profile: its additions to a locked key are
// left out (and said), never an error that stops the agent from starting
// with what the lock allows.
func TestAgentProfileBelowLocks(t *testing.T) {
	f := newFixture(t)
	f.env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:5555"
	f.write(t, "etc/policy.toml", "[network]\npolicy = \"allowlist\"\nallow = [\"127.0.0.1:5555\"]\n[env]\npassthrough = []\n[managed]\nlocked = [\"network.allow\", \"env.passthrough\"]\n")
	c, _, warn, err := f.loadAgent(t, []string{"claude"})
	if err != nil {
		t.Fatal(err)
	}
	if hosts := allowHosts(c); !slices.Equal(hosts, []string{"127.0.0.1/32"}) {
		t.Errorf("allow %q, want only the locked list", hosts)
	}
	if len(c.Env.Passthrough) != 0 {
		t.Errorf("passthrough %q under a lock of the empty list", c.Env.Passthrough)
	}
	if !strings.Contains(warn, `network.allow "platform.claude.com:443" left out: network.allow is locked`) || !strings.Contains(warn, `env.passthrough "ANTHROPIC_API_KEY" left out`) {
		t.Errorf("warnings:\n%s", warn)
	}

	// network.policy locked at none: the profile cannot switch it.
	f = newFixture(t)
	f.write(t, "etc/policy.toml", "[network]\npolicy = \"none\"\n[managed]\nlocked = [\"network.policy\"]\n")
	c, _, warn, err = f.loadAgent(t, []string{"codex"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Network.Policy != NetNone || !strings.Contains(warn, "network.policy is locked") {
		t.Errorf("network %s, warnings:\n%s", c.Network.Policy, warn)
	}
}

// policy show has no side effects: without AgentState nothing is created
// and the missing state is simply not granted.
func TestAgentProfileShowCreatesNothing(t *testing.T) {
	f := newFixture(t)
	c, _, err := Load(LoadOptions{ManagedDir: f.managed, Home: f.home, Workspace: f.ws, Argv: []string{"claude"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.home + "/.claude"); !os.IsNotExist(err) {
		t.Errorf("loading without AgentState created ~/.claude (%v)", err)
	}
	if slices.Contains(paths(c.WritableRoots), f.home+"/.claude/projects") {
		t.Errorf("a missing state directory was granted")
	}
}
