package policy

import (
	"slices"
	"strings"
	"testing"
)

func claudeTier() CommandTier {
	return CommandTier{
		Agent:     "claude-code",
		Scrub:     []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"},
		DenyHosts: []NetRule{mustRule("api.anthropic.com:443"), mustRule("platform.claude.com:443")},
		ReadOnly:  []Anchor{{Path: "/home/u/.claude"}, {Path: "/home/u/proj/.claude-state"}},
	}
}

func TestCommandRequest(t *testing.T) {
	parent := tightenParent()
	parent.Env.Passthrough = []string{"ANTHROPIC_*", "LANG"}
	parent.Network.Allow = append(parent.Network.Allow, mustRule("*.claude.com:443"), mustRule("github.com:443"))
	before, _ := parent.Digest()
	req, warnings := CommandRequest(parent, claudeTier())
	if after, _ := parent.Digest(); after != before {
		t.Fatal("CommandRequest modified the parent")
	}
	child, err := Tighten(parent, req)
	if err != nil {
		t.Fatalf("the command tier is not tighter than its agent: %v", err)
	}

	// Credentials: scrubbed and no passthrough keeps them.
	if slices.Contains(child.Env.Passthrough, "ANTHROPIC_*") || !slices.Contains(child.Env.Passthrough, "LANG") {
		t.Errorf("passthrough = %v, want LANG only", child.Env.Passthrough)
	}
	for _, g := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "*_TOKEN"} {
		if !slices.Contains(child.Env.Scrub, g) {
			t.Errorf("scrub %v lacks %s", child.Env.Scrub, g)
		}
	}

	// Provider hosts: gone, and the wildcard that admitted one with them.
	var allow []string
	for _, r := range child.Network.Allow {
		allow = append(allow, FormatNetRule(r))
	}
	if want := []string{"**.example.org", "10.0.0.0/8:80,443,8000-8999", "github.com:443"}; !slices.Equal(allow, want) {
		t.Errorf("allow = %v, want %v", allow, want)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "*.claude.com:443") || !strings.Contains(warnings[0], "platform.claude.com:443") {
		t.Errorf("warnings = %q, want one naming *.claude.com:443 and platform.claude.com:443", warnings)
	}

	// Agent state: its writable root is gone, state below the workspace
	// is protected.
	if underAny("/home/u/.claude/projects/x", child.WritableRoots) {
		t.Errorf("writable roots %v still admit the agent's state", child.WritableRoots)
	}
	if !underAny("/home/u/proj/src", child.WritableRoots) {
		t.Errorf("writable roots %v lost the workspace", child.WritableRoots)
	}
	if !slices.ContainsFunc(child.ProtectedPaths, func(a Anchor) bool { return a.Path == "/home/u/proj/.claude-state" }) {
		t.Errorf("protected paths %v lack the agent state inside the workspace", child.ProtectedPaths)
	}
}

func TestCommandRequestNetworkEdges(t *testing.T) {
	parent := tightenParent()
	parent.Network.Allow = []NetRule{mustRule("api.anthropic.com:443")}
	req, warnings := CommandRequest(parent, claudeTier())
	if req.Network.Policy != NetNone || len(req.Network.Allow) != 0 || len(warnings) != 0 {
		t.Errorf("only the provider host allowed: child network %s %v, warnings %q; want none and no warning", req.Network.Policy, req.Network.Allow, warnings)
	}

	parent.Mode, parent.Network = ModeFullAccess, Network{Policy: NetFull, Loopback: LoopbackAll}
	req, warnings = CommandRequest(parent, claudeTier())
	if req.Network.Policy != NetFull || len(warnings) != 1 || !strings.Contains(warnings[0], `network is "full"`) {
		t.Errorf("full network: child %s, warnings %q; want full and a warning that the hosts stay reachable", req.Network.Policy, warnings)
	}
}
