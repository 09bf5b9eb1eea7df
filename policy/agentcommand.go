package policy

import (
	"fmt"
	"slices"

	"github.com/openoxide/oxsupervise/agent"
)

// Keys of [agent.NAME.command] in policy files: what the agent's commands
// lose besides what the profile names (docs/agents-tiers.md).
var commandKeys = map[string]keySpec{
	"scrub":      {kind: kindStrings, check: checkEnvGlob, hint: "environment names or globs kept from the agent's commands"},
	"deny_hosts": {kind: kindStrings, check: checkNetEntry, hint: schema()["network.allow"].hint},
	"read_only":  {kind: kindStrings, check: checkPath, hint: "absolute or ~/ paths of agent state the commands may not write"},
}

// commandKey is where decodeAgentTable keeps a [agent.NAME.command] key.
func commandKey(name, key string) string { return "agent." + name + ".command." + key }

// AgentCommand is the [agent.NAME.command] table as merged, kept in the
// compiled AgentProfile so that the supervisor of a nested session can
// compute the command tier from the parent's policy alone.
type AgentCommand struct {
	Scrub     []string `json:"scrub,omitempty"`
	DenyHosts []string `json:"deny_hosts,omitempty"`
	// ReadOnly are absolute paths (~ expanded).
	ReadOnly []string `json:"read_only,omitempty"`
	// Sources are the file:line of each value, by key and value.
	Sources map[string]string `json:"sources,omitempty"`
}

// agentCommand collects the merged [agent.NAME.command] values.
func (m *merged) agentCommand(name, home, workspace string) *AgentCommand {
	ac := &AgentCommand{Sources: map[string]string{}}
	get := func(key string, dst *[]string, abs bool) {
		s, ok := m.eff[commandKey(name, key)]
		if !ok {
			return
		}
		for i, v := range s.val.([]string) {
			if abs {
				v = absPath(v, home, workspace)
			}
			*dst = append(*dst, v)
			ac.Sources[key+" "+v] = s.elemSource(i)
		}
	}
	get("scrub", &ac.Scrub, false)
	get("deny_hosts", &ac.DenyHosts, false)
	get("read_only", &ac.ReadOnly, true)
	if len(ac.Scrub)+len(ac.DenyHosts)+len(ac.ReadOnly) == 0 {
		return nil
	}
	return ac
}

// CommandTier is the command tier of the session's agent profile (the
// zero tier without a profile): the credentials the profile names or
// passed through, the hosts it named or granted (its endpoints included),
// the state roots it made writable, and what [agent.NAME.command] adds.
func (c *Compiled) CommandTier() (CommandTier, error) {
	if c.Agent == nil {
		return CommandTier{}, nil
	}
	t := CommandTier{Agent: c.Agent.Name}
	if p, ok := agent.Lookup(c.Agent.Name); ok {
		for _, e := range p.Credentials {
			t.Scrub = union(t.Scrub, []string{e.Value})
		}
		for _, e := range p.Hosts {
			r, err := ParseNetRule(e.Value)
			if err != nil {
				return CommandTier{}, fmt.Errorf("agent %s: host %q: %w", p.Name, e.Value, err)
			}
			t.DenyHosts = appendRule(t.DenyHosts, r)
		}
	}
	for _, g := range c.Agent.Granted {
		v, _ := g.Value.(string)
		switch g.Key {
		case "env.passthrough":
			t.Scrub = union(t.Scrub, []string{v})
		case "network.allow":
			r, err := ParseNetRule(v)
			if err != nil {
				return CommandTier{}, fmt.Errorf("agent %s: granted host %q: %w", c.Agent.Name, v, err)
			}
			r.Source = g.Source
			t.DenyHosts = appendRule(t.DenyHosts, r)
		case "sandbox.writable_roots":
			a := Anchor{Path: v, Source: g.Source}
			if i := slices.IndexFunc(c.WritableRoots, func(w Anchor) bool { return w.Path == v }); i >= 0 {
				a = c.WritableRoots[i]
			}
			t.ReadOnly = unionAnchors(t.ReadOnly, []Anchor{a})
		}
	}
	if ac := c.Agent.Command; ac != nil {
		t.Scrub = union(t.Scrub, ac.Scrub)
		for _, h := range ac.DenyHosts {
			r, err := ParseNetRule(h)
			if err != nil {
				return CommandTier{}, fmt.Errorf("%s: agent.%s.command.deny_hosts %q: %w", ac.Sources["deny_hosts "+h], c.Agent.Name, h, err)
			}
			r.Source = ac.Sources["deny_hosts "+h]
			t.DenyHosts = appendRule(t.DenyHosts, r)
		}
		for _, p := range ac.ReadOnly {
			t.ReadOnly = unionAnchors(t.ReadOnly, []Anchor{{Path: p, Source: ac.Sources["read_only "+p]}})
		}
	}
	return t, nil
}

func appendRule(rs []NetRule, r NetRule) []NetRule {
	if slices.ContainsFunc(rs, func(x NetRule) bool { return FormatNetRule(x) == FormatNetRule(r) }) {
		return rs
	}
	return append(rs, r)
}
