package policy

import "fmt"

// TierRequest is what a nested session asks for with --tier: request (what
// its flags compiled to, or the parent's policy itself) without what the
// tier takes away, from the parent's agent profile (Compiled.CommandTier).
// agentName, when not empty, must be the parent's profile: a command tier
// is the tier of the agent whose session it runs in. Tighten(parent, the
// result) still decides what the child gets.
func TierRequest(parent, request *Compiled, tier, agentName string) (*Compiled, []string, error) {
	switch tier {
	case "":
		return request, nil, nil
	case "command":
	default:
		return nil, nil, fmt.Errorf("unknown tier %q (the tiers: command)", tier)
	}
	if parent.Agent == nil {
		return nil, nil, fmt.Errorf("--tier=command: the session has no agent profile, so there is no command tier to take (start the agent with --agent NAME)")
	}
	if agentName != "" && agentName != parent.Agent.Name {
		return nil, nil, fmt.Errorf("--tier=command --agent=%s: the session runs agent profile %s", agentName, parent.Agent.Name)
	}
	t, err := parent.CommandTier()
	if err != nil {
		return nil, nil, err
	}
	out, warnings := CommandRequest(request, t)
	return out, warnings, nil
}
