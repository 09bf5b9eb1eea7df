package policy

import (
	"fmt"
	"path"
	"slices"
)

// CommandTier is what separates the commands an agent runs from the agent
// itself (DESIGN §8, two tiers): the agent's session holds the agent with
// its provider credentials, provider hosts and state; each command it runs
// goes into a nested session that has none of the three and the rest of
// the user's policy.
//
// Compiled.CommandTier builds it from the session's agent profile
// (package agent: its Credentials, Hosts and the State it granted) and
// what the policy files add:
//
//	[agent.claude-code.command]
//	scrub = ["MY_GATEWAY_KEY"]          # more names kept from commands
//	deny_hosts = ["gateway.corp:443"]   # more hosts commands may not reach
//	read_only = ["~/.config/claude"]    # more agent state commands may not write
type CommandTier struct {
	// Agent is the profile's name, for messages and sources.
	Agent string
	// Scrub are environment name globs (the provider credentials) removed
	// from the command's environment, passthrough or not.
	Scrub []string
	// DenyHosts are the provider and login endpoints: no allow entry of
	// the command's session may admit them.
	DenyHosts []NetRule
	// ReadOnly are the agent's state locations: no writes from a command.
	ReadOnly []Anchor
}

// CommandRequest returns the policy a command of the agent asks for: the
// agent session's policy (parent) without the tier's credentials, hosts
// and state writes. It is tighter than parent by construction, and the
// nested session still goes through Tighten(parent, request), the one
// place that decides what a child gets. Warnings say what the tier could
// not take away or took away more broadly than asked: an allow entry
// that covers a provider host is removed whole (an allowlist has no deny
// entries to cut a hole with), and a parent with network "full" keeps
// every host reachable.
func CommandRequest(parent *Compiled, tier CommandTier) (*Compiled, []string) {
	out := cloneCompiled(parent)
	// A command is not the agent: no profile arguments, no rollback of the
	// agent's guarded state files at its end.
	out.Agent = nil
	var warnings []string
	src := "command tier of " + tier.Agent

	// Credentials: scrubbed, and no passthrough glob may keep them.
	for _, g := range tier.Scrub {
		if !slices.Contains(out.Env.Scrub, g) {
			out.Env.Scrub = append(out.Env.Scrub, g)
		}
	}
	out.Env.Passthrough = slices.DeleteFunc(out.Env.Passthrough, func(p string) bool {
		return slices.ContainsFunc(tier.Scrub, func(g string) bool { return globsOverlap(g, p) })
	})

	// Provider hosts.
	switch out.Network.Policy {
	case NetFull:
		if len(tier.DenyHosts) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s: network is \"full\", so commands can reach the provider hosts too (%s); use an allowlist to keep them out", src, netRuleList(tier.DenyHosts)))
		}
	case NetAllowlist:
		out.Network.Allow = slices.DeleteFunc(out.Network.Allow, func(e NetRule) bool {
			for _, d := range tier.DenyHosts {
				if overlapsRule(e, d) {
					if FormatNetRule(e) != FormatNetRule(d) {
						warnings = append(warnings, fmt.Sprintf("%s: allow entry %s (%s) also admits provider host %s: removed for commands", src, FormatNetRule(e), e.Source, FormatNetRule(d)))
					}
					return true
				}
			}
			return false
		})
		if len(out.Network.Allow) == 0 {
			out.Network.Policy, out.Network.Allow = NetNone, nil
		}
	}

	// Agent state: no writable root at or below it; below a root that
	// stays writable it becomes a protected path.
	out.WritableRoots = slices.DeleteFunc(out.WritableRoots, func(w Anchor) bool {
		return slices.ContainsFunc(tier.ReadOnly, func(s Anchor) bool { return within(s.Path, w.Path) })
	})
	if out.FilesystemRules {
		for _, s := range tier.ReadOnly {
			if underAny(s.Path, out.WritableRoots) && !slices.ContainsFunc(out.ProtectedPaths, func(p Anchor) bool { return p.Path == s.Path }) {
				a := s
				if a.Source == "" {
					a.Source = src
				}
				out.ProtectedPaths = append(out.ProtectedPaths, a)
			}
		}
	}
	return out, warnings
}

// overlapsRule reports whether some destination is admitted by both a
// (an allow entry) and d (a denied host): a covered by d, or d by a.
func overlapsRule(a, d NetRule) bool {
	dAllPorts := NetRule{Prefix: d.Prefix, Host: d.Host}
	aAllPorts := NetRule{Prefix: a.Prefix, Host: a.Host}
	if !coversRule(aAllPorts, dAllPorts) && !coversRule(dAllPorts, aAllPorts) {
		return false
	}
	return portsOverlap(a.Ports, d.Ports)
}

func portsOverlap(a, b []PortRange) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, x := range a {
		for _, y := range b {
			if x.First <= y.Last && y.First <= x.Last {
				return true
			}
		}
	}
	return false
}

// globsOverlap reports whether passthrough glob p could keep a name the
// scrub glob g removes: equal, or either matches the other literally
// (ANTHROPIC_* keeps ANTHROPIC_API_KEY; ANTHROPIC_API_KEY is kept by a
// passthrough of *_KEY).
func globsOverlap(g, p string) bool {
	if g == p {
		return true
	}
	if ok, _ := path.Match(g, p); ok {
		return true
	}
	ok, _ := path.Match(p, g)
	return ok
}
