package policy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The command tier of `run -- claude`: the agent gets its credentials,
// its API and its state; a command it runs (the request CommandRequest
// builds from the agent's compiled policy) gets none of them, plus what
// [agent.claude-code.command] adds, and Tighten accepts it.
func TestAgentCommandTier(t *testing.T) {
	f := newFixture(t)
	f.env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:5555"
	gateway := f.mkdir(t, "home/.config/gateway")
	f.write(t, "home/.openoxide/config.toml", `[env]
passthrough = ["MY_GATEWAY_KEY"]

[network]
allow = ["github.com:443"]

[sandbox]
writable_roots = ["~/.config/gateway"]
exclude_slash_tmp = true  # the fixture lives in /tmp: keep its home out of every other root

[agent.claude-code.command]
scrub = ["MY_GATEWAY_KEY"]
read_only = ["~/.config/gateway"]
`)
	parent, _, _, err := f.loadAgent(t, []string{"claude", "-p", "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if parent.Agent == nil || parent.Agent.Name != "claude-code" {
		t.Fatalf("agent profile %+v, want claude-code", parent.Agent)
	}
	tier, err := parent.CommandTier()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := CommandRequest(parent, tier)
	child, err := Tighten(parent, req)
	if err != nil {
		t.Fatalf("the command tier widens its agent: %v", err)
	}
	if child.Agent != nil {
		t.Errorf("the command runs with the agent's profile %+v", child.Agent)
	}

	for _, name := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "MY_GATEWAY_KEY"} {
		if !slices.Contains(parent.Env.Passthrough, name) {
			t.Errorf("the agent's passthrough %v lacks %s (the fixture is wrong)", parent.Env.Passthrough, name)
		}
		if slices.Contains(child.Env.Passthrough, name) || !slices.Contains(child.Env.Scrub, name) {
			t.Errorf("%s: command passthrough %v, scrub %v; want it scrubbed", name, child.Env.Passthrough, child.Env.Scrub)
		}
	}
	if hosts := allowHosts(parent); !slices.Contains(hosts, "127.0.0.1/32") || !slices.Contains(hosts, "github.com") {
		t.Errorf("the agent's allowlist %v lacks its API or the user's host (the fixture is wrong)", hosts)
	}
	if hosts := allowHosts(child); !slices.Equal(hosts, []string{"github.com"}) {
		t.Errorf("the command's allowlist %v, want the user's github.com only", hosts)
	}
	home := parent.Agent.Command.ReadOnly
	if len(home) != 1 || home[0] != gateway {
		t.Errorf("[agent.claude-code.command] read_only = %v, want %s", home, gateway)
	}
	var stateRoots int
	for _, a := range parent.WritableRoots {
		if strings.HasPrefix(a.Source, "profile claude-code") {
			stateRoots++
		}
		if strings.HasPrefix(a.Source, "profile claude-code") || a.Path == gateway {
			if underAny(filepath.Join(a.Path, "x"), child.WritableRoots) {
				t.Errorf("the command may write the agent's %s (%s)", a.Path, a.Source)
			}
		}
	}
	if stateRoots == 0 {
		t.Error("the profile granted no state roots (the fixture is wrong)")
	}
	if !underAny(filepath.Join(f.ws, "src"), child.WritableRoots) {
		t.Errorf("the command lost the workspace: %v", child.WritableRoots)
	}
}

func TestAgentCommandKeys(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"unknown key", "[agent.claude-code.command]\nhosts = [\"x\"]\n", "config.toml:2:1"},
		{"unknown agent", "[agent.cursor.command]\nscrub = [\"X\"]\n", `no built-in agent profile "cursor"`},
		{"bad host", "[agent.codex.command]\ndeny_hosts = [\"a b\"]\n", "config.toml:2:"},
	} {
		f := newFixture(t)
		f.write(t, "home/.openoxide/config.toml", tc.file)
		_, _, _, err := f.loadAgent(t, []string{"claude"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
	// Without a profile there is no tier, and the request is the parent's.
	c := tightenParent()
	if tier, err := c.CommandTier(); err != nil || tier.Agent != "" || len(tier.Scrub)+len(tier.DenyHosts)+len(tier.ReadOnly) != 0 {
		t.Errorf("no profile: tier %+v, %v; want the zero tier", tier, err)
	}
}
