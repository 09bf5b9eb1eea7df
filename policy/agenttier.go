package policy

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/openoxide/oxsupervise/agent"
)

// AgentCommandTier is the command tier of the built-in agent profile name
// for a user (in's Home and Env: the agent's base-URL settings move its
// provider hosts): the profile's credentials scrubbed, its provider and
// login hosts denied, its state read-only. It is what the agent session's
// grants added, taken back for the agent's commands.
func AgentCommandTier(name string, in agent.Inputs) (CommandTier, error) {
	prof, ok := agent.Lookup(name)
	if !ok {
		return CommandTier{}, fmt.Errorf("no built-in agent profile %q for the command tier", name)
	}
	if in.ReadFile == nil {
		in.ReadFile = os.ReadFile
	}
	g, err := prof.Grants(in)
	if err != nil {
		return CommandTier{}, err
	}
	t := CommandTier{Agent: name}
	for _, p := range g.Passthrough {
		t.Scrub = append(t.Scrub, p.Value)
	}
	for _, h := range g.NetAllow {
		r, err := ParseNetRule(h.Value)
		if err != nil {
			return CommandTier{}, fmt.Errorf("agent %s: host %q (%s): %w", name, h.Value, h.Source, err)
		}
		r.Source = h.Source
		t.DenyHosts = append(t.DenyHosts, r)
	}
	for _, w := range g.Writable {
		p := w.Value
		// Anchors are symlink-resolved, as the roots they are compared with.
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		t.ReadOnly = append(t.ReadOnly, Anchor{Path: p, Source: w.Source})
	}
	return t, nil
}
