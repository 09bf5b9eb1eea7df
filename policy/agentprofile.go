package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/openoxide/oxsupervise/agent"
)

// AgentProfile is the agent profile a session runs with (package agent),
// as compiled: what the command line and environment of the agent get
// besides the filesystem and network rules, which are in Compiled's
// other fields with the profile as their source.
type AgentProfile struct {
	Name string `json:"name"`
	// Source says how it was chosen ("detected from the command claude",
	// "flag --agent").
	Source string `json:"source"`
	// Args are inserted into the command line at ArgsAt (after the
	// agent's name, or after the package npx runs).
	Args   []string `json:"args,omitempty"`
	ArgsAt int      `json:"args_at,omitempty"`
	// Guarded are the state files whose program-starting keys are rolled
	// back after the session.
	Guarded []agent.GuardedFile `json:"guarded,omitempty"`
	// Granted lists every value the profile added, by policy key, with
	// the documentation or source it cites (for policy show).
	Granted []EffectiveValue `json:"granted,omitempty"`
	// Command is [agent.NAME.command] (Compiled.CommandTier).
	Command *AgentCommand `json:"command,omitempty"`
}

// AgentOwner is the user a profile's missing state entries are created
// for (LoadOptions.AgentState).
type AgentOwner struct{ UID, GID int }

// Keys of [agent.NAME.profile] in policy files, below "agent.NAME.profile.".
var profileKeys = map[string]keySpec{
	"enabled":     {kind: kindBool},
	"allow":       {kind: kindStrings, check: checkNetEntry, hint: schema()["network.allow"].hint},
	"writable":    {kind: kindStrings, check: checkPath},
	"read_only":   {kind: kindStrings, check: checkProtected},
	"passthrough": {kind: kindStrings, check: checkEnvGlob},
}

// profileKey is where decodeAgentTable keeps a [agent.NAME.profile] key.
func profileKey(name, key string) string { return "agent." + name + ".profile." + key }

// decodeAgentTable reads one [agent.NAME.TABLE] table of a built-in
// profile (TABLE "profile" or "command", whose keys are specs) into l: its
// values are kept as settings under "agent.NAME.TABLE.KEY", so layers
// merge them like any key (a lower layer's value replaces a higher one's).
func (d *doc) decodeAgentTable(l *layer, name, table string, specs map[string]keySpec, v any) error {
	path := []string{"agent", name, table}
	if _, ok := agent.Lookup(name); !ok {
		return &Error{Pos: d.keyPos(path), Msg: fmt.Sprintf("no built-in agent profile %q", name), Hint: "profiles: " + strings.Join(agent.Names(), ", ")}
	}
	tbl, ok := v.(map[string]any)
	if !ok {
		return d.typeError(path, "a table", v)
	}
	for _, k := range sortedKeys(tbl) {
		spec, ok := specs[k]
		if !ok {
			return d.unknownKey(append(slices.Clone(path), k), sortedKeys(specs))
		}
		s, err := d.decodeValue(append(slices.Clone(path), k), spec, tbl[k])
		if err != nil {
			return err
		}
		l.settings["agent."+name+"."+table+"."+k] = s
	}
	return nil
}

// profileLayer picks the session's agent profile (--agent, else detected
// from the command line) and turns it into a layer applied after the
// user's files and before the flags. A managed lock still wins: the
// profile's additions to a locked key are limited to what the lock
// allows, and each one left out is said on opts.Warn.
func profileLayer(opts LoadOptions, m *merged, workspace string) (*layer, *AgentProfile, error) {
	var prof *agent.Profile
	how := ""
	detected, at := agent.Detect(opts.Argv)
	if opts.Flags.changed(FlagAgent) {
		name := opts.Flags.Agent
		if name == agent.None {
			return nil, nil, nil
		}
		p, ok := agent.Lookup(name)
		if !ok {
			return nil, nil, &Error{Pos: pos{File: "flag --agent"}, Msg: fmt.Sprintf("no built-in agent profile %q", name), Hint: "profiles: " + strings.Join(agent.Names(), ", ") + ", or none"}
		}
		prof, how = p, "flag --agent"
	} else if detected != nil {
		prof, how = detected, "detected from the command "+filepath.Base(opts.Argv[0])
	}
	if prof == nil {
		return nil, nil, nil
	}
	if s, ok := m.eff[profileKey(prof.Name, "enabled")]; ok && !s.val.(bool) {
		fmt.Fprintf(opts.Warn, "oxsupervise: agent profile %s is disabled (%s)\n", prof.Name, s.source())
		return nil, nil, nil
	}
	if opts.AgentState != nil {
		if _, err := prof.Prepare(opts.Home, opts.AgentState.UID, opts.AgentState.GID); err != nil {
			return nil, nil, err
		}
	}
	g, err := prof.Grants(agent.Inputs{Argv: opts.Argv, Env: opts.Env, Home: opts.Home, ReadFile: os.ReadFile})
	if err != nil {
		return nil, nil, err
	}
	// Overrides from the files add to the built-in grants.
	extra := func(key string) []agent.Grant {
		s, ok := m.eff[profileKey(prof.Name, key)]
		if !ok {
			return nil
		}
		var out []agent.Grant
		for i, v := range s.val.([]string) {
			if key == "writable" || key == "read_only" && (filepath.IsAbs(v) || strings.HasPrefix(v, "~")) {
				v = absPath(v, opts.Home, workspace)
			}
			out = append(out, agent.Grant{Value: v, Source: s.elemSource(i)})
		}
		return out
	}
	g.NetAllow = append(g.NetAllow, extra("allow")...)
	g.Writable = append(g.Writable, extra("writable")...)
	g.ReadOnly = append(g.ReadOnly, extra("read_only")...)
	g.Passthrough = append(g.Passthrough, extra("passthrough")...)

	l := newLayer(prof.Source(), false)
	src := prof.Source()
	ap := &AgentProfile{Name: prof.Name, Source: how, Guarded: prof.Guarded, Command: m.agentCommand(prof.Name, opts.Home, opts.Workspace)}
	addList := func(key string, grants []agent.Grant, keep func(agent.Grant) bool) {
		cur := m.get(key)
		list := slices.Clone(cur.val.([]string))
		elems := make([]pos, len(list))
		for i := range list {
			elems[i] = pos{File: cur.elemSource(i)}
		}
		lv, locked := m.lockedVal[key]
		changed := false
		for _, gr := range grants {
			if slices.Contains(list, gr.Value) || keep != nil && !keep(gr) {
				continue
			}
			if locked && schema()[key].tighten == tightenSubset && !slices.Contains(lv.val.([]string), gr.Value) {
				fmt.Fprintf(opts.Warn, "oxsupervise: agent profile %s: %s %q left out: %s is locked by managed policy (%s)\n", prof.Name, key, gr.Value, key, m.locks[key])
				continue
			}
			list = append(list, gr.Value)
			elems = append(elems, pos{File: gr.Source})
			ap.Granted = append(ap.Granted, EffectiveValue{Key: key, Value: gr.Value, Source: gr.Source})
			changed = true
		}
		if changed {
			l.settings[key] = setting{val: list, src: src, elems: elems}
		}
	}
	if p := m.str("network.policy"); p == string(NetNone) && len(g.NetAllow) > 0 {
		if lv, locked := m.lockedVal["network.policy"]; locked && schema()["network.policy"].looser(lv.val, string(NetAllowlist)) {
			fmt.Fprintf(opts.Warn, "oxsupervise: agent profile %s: network stays %q: network.policy is locked by managed policy (%s); the agent cannot reach its model API\n", prof.Name, p, m.locks["network.policy"])
		} else {
			l.settings["network.policy"] = setting{val: string(NetAllowlist), src: src}
		}
	}
	if m.str("network.policy") != string(NetFull) {
		addList("network.allow", g.NetAllow, nil)
	}
	addList("env.passthrough", g.Passthrough, nil)
	addList("sandbox.writable_roots", g.Writable, func(gr agent.Grant) bool {
		// A kernel rule names an inode: what does not exist (a state
		// file the profile does not create) is not granted.
		_, err := os.Stat(gr.Value)
		return err == nil
	})
	// Rule files outside every writable root are read-only already, and
	// there the filesystem layer audits a refused write; inside one
	// (Codex's ~/.codex) they are protected paths.
	roots := []string{workspace}
	for _, r := range m.strings("sandbox.writable_roots") {
		roots = append(roots, absPath(r, opts.Home, workspace))
	}
	for _, w := range g.Writable {
		roots = append(roots, w.Value)
	}
	addList("sandbox.protected_subpaths", g.ReadOnly, func(gr agent.Grant) bool {
		if !filepath.IsAbs(gr.Value) {
			return true
		}
		return slices.ContainsFunc(roots, func(r string) bool { return within(r, gr.Value) })
	})
	switch {
	case detected != nil && detected.Name == prof.Name:
		ap.ArgsAt = at
		for _, a := range g.Args {
			ap.Args = append(ap.Args, a.Value)
		}
	case len(g.Args) > 0 && len(opts.Argv) > 0:
		fmt.Fprintf(opts.Warn, "oxsupervise: agent profile %s: the command %q is not the agent itself, so its switches %q were not added; set them yourself (see oxsupervise agents)\n", prof.Name, opts.Argv[0], argValues(g.Args))
	}
	for _, e := range g.SetEnv {
		l.settings["agent.env."+e.Value[:strings.IndexByte(e.Value, '=')]] = setting{val: e.Value, src: e.Source}
		ap.Granted = append(ap.Granted, EffectiveValue{Key: "agent.env", Value: e.Value, Source: e.Source})
	}
	return l, ap, nil
}

// isProfileSource reports whether a value came from an agent profile (a
// profile may make a state file writable; files name directories only).
func isProfileSource(src string) bool { return strings.HasPrefix(src, "profile ") }

// agentEnv lists the "NAME=value" variables the profile layer set.
func (m *merged) agentEnv() []string {
	var out []string
	for _, k := range sortedKeys(m.eff) {
		if strings.HasPrefix(k, "agent.env.") {
			out = append(out, m.eff[k].val.(string))
		}
	}
	return out
}

// agentEffective adds the profile's own values to policy show.
func (m *merged) agentEffective(e *Effective, ap *AgentProfile) {
	for _, k := range sortedKeys(m.eff) {
		if strings.HasPrefix(k, "agent.") && (strings.Contains(k, ".profile.") || strings.Contains(k, ".command.") || strings.HasPrefix(k, "agent.env.")) {
			s := m.eff[k]
			e.Values = append(e.Values, EffectiveValue{Key: k, Value: s.val, Source: s.source()})
		}
	}
	if ap != nil {
		e.Values = append(e.Values, EffectiveValue{Key: "agent.profile", Value: ap.Name, Source: ap.Source})
		if len(ap.Args) > 0 {
			e.Values = append(e.Values, EffectiveValue{Key: "agent.args", Value: ap.Args, Source: "profile " + ap.Name + " (built in)"})
		}
		for _, g := range ap.Granted {
			g.Key = "agent.granted." + g.Key
			e.Values = append(e.Values, g)
		}
	}
}

// CommandLine is argv with the agent profile's arguments inserted after
// the command's name (argv itself when there is no profile).
func (c *Compiled) CommandLine(argv []string) []string {
	if c == nil || c.Agent == nil || len(c.Agent.Args) == 0 || len(argv) == 0 {
		return argv
	}
	at := min(max(c.Agent.ArgsAt, 1), len(argv))
	out := append(slices.Clone(argv[:at]), c.Agent.Args...)
	return append(out, argv[at:]...)
}

func argValues(gs []agent.Grant) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Value)
	}
	return out
}

// citeGrants gives the compiled entries the profile added the source of
// the grant (the profile and its citation, or the override's file:line);
// the merged list only knows which layer set it last.
func citeGrants(c *Compiled, ap *AgentProfile) {
	if ap == nil {
		return
	}
	for _, g := range ap.Granted {
		switch g.Key {
		case "network.allow":
			want, err := ParseNetRule(g.Value.(string))
			if err != nil {
				continue
			}
			for i, r := range c.Network.Allow {
				if r.Host == want.Host && r.Prefix == want.Prefix && slices.Equal(r.Ports, want.Ports) {
					c.Network.Allow[i].Source = g.Source
				}
			}
		case "sandbox.writable_roots":
			for i, a := range c.WritableRoots {
				if a.Path == g.Value.(string) {
					c.WritableRoots[i].Source = g.Source
				}
			}
		}
	}
}
