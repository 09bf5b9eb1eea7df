package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ErrWidens is matched (errors.Is) by every error Tighten returns for a
// request that asks for more than its parent has.
var ErrWidens = errors.New("a nested session's policy may not be looser than its parent's")

// WidenError is one dimension on which a nested session's request is
// looser than its parent: the dimension as a policy key (sandbox.mode,
// network.allow, ...), what the child asked for and what the parent has.
type WidenError struct {
	Dimension string
	Requested string
	Parent    string
}

func (e *WidenError) Error() string {
	return fmt.Sprintf("%s: the nested session asks for %s, its parent allows %s", e.Dimension, e.Requested, e.Parent)
}

// Is makes every WidenError match ErrWidens.
func (e *WidenError) Is(target error) bool { return target == ErrWidens }

// Tighten is the one place that decides what a nested session (a `run`
// inside a session) gets: the parent's effective policy made tighter by the
// child's request, and never looser on any dimension. A request that asks
// for more than the parent has on any dimension fails with one WidenError
// per offending dimension (joined), naming the key and the value: a child
// that silently got less than it asked for would run with rules nobody
// wrote down, and a test or a user would never learn that the request was
// refused.
//
// The dimensions and their order (strictest first):
//
//   - sandbox.mode: read-only < workspace-write < external-sandbox <
//     full-access (the order of the managed locks, modeNames). external-
//     sandbox lies above workspace-write because it builds no filesystem
//     rules at all; full-access above it because it also lifts the network
//     rules. The child's mode must also be in the parent's allowed_modes.
//   - sandbox.allowed_modes: the child's list ⊆ the parent's.
//   - sandbox.approval: untrusted < on-request < on-failure < never.
//   - sandbox.writable_roots: every child root at or below a parent root
//     (when the parent has filesystem rules; a parent in external-sandbox
//     or full-access has none to exceed).
//   - sandbox.read_only_access and readable_roots: restricted < full; under
//     a restricted parent every child readable root lies at or below a
//     parent one.
//   - protected names and paths, deny-read anchors and globs: the union of
//     both (a child cannot drop what its parent protects; not asking for a
//     parent's entry is not a widening, it is inherited).
//   - network.policy: none < allowlist < full; under an allowlist parent
//     every child allow entry must be covered by a parent entry (host
//     pattern, address prefix and ports); network.loopback: none < session
//     < all; allow_unix_sockets ⊆; unknown_hosts deny < ask; the resolver
//     TTL floor and cap and the ask timeout at most the parent's.
//   - limits.pids_max, limits.memory_max: the smaller; a child value of 0
//     (no limit of its own) inherits the parent's, which the cgroup
//     hierarchy enforces below the parent's group anyway; a larger value
//     than the parent's is a widening.
//   - env.passthrough ⊆ the parent's; env.scrub the union.
//   - sandbox.allow_unsandboxed_commands: a child can only turn it off;
//     excluded_commands ⊆ the parent's.
//   - permissions: the default at most as loose as the parent's (deny <
//     ask < allow); every parent rule kept, the child's deny and ask rules
//     added; a child allow rule the parent does not have is a widening
//     (allow rules are checked before ask rules, so a new one could
//     override a parent's ask). The same per agent.
//   - audit: the parent's, whatever the request says: the child's records
//     go to the supervisor that serves the parent, and a child must not
//     move its refusals out of the parent's log.
//   - sandbox.capabilities: the child's ⊆ the parent's (a session keeps
//     no capability unless its policy names it); sandbox.require: the
//     union (a child needs every mechanism its parent needs).
//
// Tighten does not modify its arguments.
func Tighten(parent, request *Compiled) (*Compiled, error) {
	if parent == nil || request == nil {
		return nil, errors.New("policy: Tighten needs both a parent and a request")
	}
	if parent.SchemaVersion != request.SchemaVersion {
		return nil, fmt.Errorf("policy: parent policy schema %d, request schema %d", parent.SchemaVersion, request.SchemaVersion)
	}
	t := tightener{parent: parent, req: request, out: cloneCompiled(request)}
	t.modes()
	t.filesystem()
	t.network()
	t.envAndLimits()
	t.permissions()
	t.out.Audit = parent.Audit
	t.out.Locked = union(parent.Locked, request.Locked)
	if len(t.errs) > 0 {
		return nil, errors.Join(t.errs...)
	}
	return t.out, nil
}

type tightener struct {
	parent, req, out *Compiled
	errs             []error
}

func (t *tightener) widen(dim, requested, parent string) {
	t.errs = append(t.errs, &WidenError{Dimension: dim, Requested: requested, Parent: parent})
}

// rankLooser reports whether child is looser than parent for an enum key,
// in the order the schema keeps for managed locks (strictest first).
func rankLooser(key, parent, child string) bool {
	return schema()[key].looser(parent, child)
}

func (t *tightener) enum(key, parent, child string) {
	if rankLooser(key, parent, child) {
		t.widen(key, strconv.Quote(child), strconv.Quote(parent))
	}
}

func (t *tightener) modes() {
	p, r := t.parent, t.req
	t.enum("sandbox.mode", string(p.Mode), string(r.Mode))
	if len(p.AllowedModes) > 0 && !slices.Contains(p.AllowedModes, r.Mode) {
		t.widen("sandbox.mode", strconv.Quote(string(r.Mode)), "allowed_modes "+fmtList(p.AllowedModes))
	}
	if len(p.AllowedModes) > 0 {
		for _, m := range r.AllowedModes {
			if !slices.Contains(p.AllowedModes, m) {
				t.widen("sandbox.allowed_modes", strconv.Quote(string(m)), fmtList(p.AllowedModes))
			}
		}
		if len(r.AllowedModes) == 0 {
			t.out.AllowedModes = slices.Clone(p.AllowedModes)
		}
	}
	t.enum("sandbox.approval", string(p.Approval), string(r.Approval))
}

func (t *tightener) filesystem() {
	p, r, out := t.parent, t.req, t.out
	if p.FilesystemRules {
		for _, a := range r.WritableRoots {
			if !underAny(a.Path, p.WritableRoots) {
				t.widen("sandbox.writable_roots", strconv.Quote(a.Path), anchorList(p.WritableRoots))
			}
		}
		t.enum("sandbox.read_only_access", string(p.ReadAccess), string(r.ReadAccess))
		if p.ReadAccess == ReadAccessRestricted && r.ReadAccess == ReadAccessRestricted {
			for _, a := range r.ReadableRoots {
				if !underAny(a.Path, p.ReadableRoots) {
					t.widen("sandbox.readable_roots", strconv.Quote(a.Path), anchorList(p.ReadableRoots))
				}
			}
		}
	}
	out.ProtectedPatterns = slices.Clone(r.ProtectedPatterns)
	for _, pp := range p.ProtectedPatterns {
		i := slices.IndexFunc(out.ProtectedPatterns, func(q ProtectedPattern) bool {
			return slices.Equal(q.Components, pp.Components) && q.Type == pp.Type
		})
		switch {
		case i < 0:
			out.ProtectedPatterns = append(out.ProtectedPatterns, pp)
		case !pp.CheckedAtEnd:
			// A creation the parent refuses stays refused in the child.
			out.ProtectedPatterns[i].CheckedAtEnd = false
		}
	}
	out.ProtectedPaths = unionAnchors(r.ProtectedPaths, p.ProtectedPaths)
	out.ProtectedPathsComplete = p.ProtectedPathsComplete && r.ProtectedPathsComplete
	out.DenyRead = unionAnchors(r.DenyRead, p.DenyRead)
	out.DenyReadGlobs = slices.Clone(r.DenyReadGlobs)
	for _, g := range p.DenyReadGlobs {
		if !slices.ContainsFunc(out.DenyReadGlobs, func(h NameGlob) bool {
			return h.Within == g.Within && h.Include == g.Include && slices.Equal(h.Exclude, g.Exclude)
		}) {
			out.DenyReadGlobs = append(out.DenyReadGlobs, g)
		}
	}
}

func (t *tightener) network() {
	p, r := t.parent.Network, t.req.Network
	t.enum("network.policy", string(p.Policy), string(r.Policy))
	if p.Policy == NetAllowlist && r.Policy == NetAllowlist {
		for _, e := range r.Allow {
			if !slices.ContainsFunc(p.Allow, func(pe NetRule) bool { return coversRule(pe, e) }) {
				t.widen("network.allow", strconv.Quote(FormatNetRule(e)), netRuleList(p.Allow))
			}
		}
	}
	t.enum("network.loopback", string(p.Loopback), string(r.Loopback))
	if t.parent.FilesystemRules {
		for _, s := range r.AllowUnixSockets {
			if !slices.Contains(p.AllowUnixSockets, s) {
				t.widen("network.allow_unix_sockets", strconv.Quote(s), fmtList(p.AllowUnixSockets))
			}
		}
	}
	if p.Policy == NetFull {
		return // the resolver keys only narrow an allowlist: a full parent has none to exceed
	}
	t.enum("network.unknown_hosts", orDefault(string(p.UnknownHosts), string(UnknownHostsDeny)), orDefault(string(r.UnknownHosts), string(UnknownHostsDeny)))
	// A lower floor admits resolved addresses for less time: 0 is the
	// tightest floor, not "unlimited".
	if r.MinTTLSeconds > p.MinTTLSeconds {
		t.widen("network.min_ttl_seconds", strconv.FormatUint(uint64(r.MinTTLSeconds), 10), strconv.FormatUint(uint64(p.MinTTLSeconds), 10))
	}
	t.lower("network.max_ttl_seconds", int64(p.MaxTTLSeconds), int64(r.MaxTTLSeconds), false)
	t.lower("network.ask_timeout_seconds", int64(p.AskTimeoutSeconds), int64(r.AskTimeoutSeconds), false)
}

// lower checks a number that may only decrease where 0 means unlimited;
// with inherit, a child 0 takes the parent's value instead of widening.
// It returns the effective value.
func (t *tightener) lower(key string, parent, child int64, inherit bool) int64 {
	if parent == 0 {
		return child
	}
	if child == 0 && inherit {
		return parent
	}
	if child == 0 || child > parent {
		req := strconv.FormatInt(child, 10)
		if child == 0 {
			req = "0 (unlimited)"
		}
		t.widen(key, req, strconv.FormatInt(parent, 10))
	}
	return child
}

func (t *tightener) envAndLimits() {
	p, r, out := t.parent, t.req, t.out
	for _, g := range r.Env.Passthrough {
		if !slices.Contains(p.Env.Passthrough, g) {
			t.widen("env.passthrough", strconv.Quote(g), fmtList(p.Env.Passthrough))
		}
	}
	out.Env.Scrub = union(r.Env.Scrub, p.Env.Scrub)
	out.Limits.PidsMax = t.lower("limits.pids_max", p.Limits.PidsMax, r.Limits.PidsMax, true)
	out.Limits.MemoryMax = t.lower("limits.memory_max", p.Limits.MemoryMax, r.Limits.MemoryMax, true)
	for _, c := range r.Capabilities {
		if !slices.ContainsFunc(p.Capabilities, func(pc Capability) bool { return pc.Name == c.Name }) {
			names := make([]string, len(p.Capabilities))
			for i, pc := range p.Capabilities {
				names[i] = pc.Name
			}
			t.widen("sandbox.capabilities", c.Name, fmtList(names))
		}
	}
	for _, q := range p.Require {
		if !slices.ContainsFunc(out.Require, func(x Requirement) bool { return x.Name == q.Name }) {
			out.Require = append(out.Require, q)
		}
	}
	if r.AllowUnsandboxedCommands && !p.AllowUnsandboxedCommands {
		t.widen("sandbox.allow_unsandboxed_commands", "true", "false")
	}
	for _, c := range r.ExcludedCommands {
		if !slices.Contains(p.ExcludedCommands, c) {
			t.widen("sandbox.excluded_commands", strconv.Quote(c), fmtList(p.ExcludedCommands))
		}
	}
}

func (t *tightener) permissions() {
	p, r := t.parent.Permissions, t.req.Permissions
	t.enum("permissions.default", orDefault(string(p.Default), string(ActionAsk)), orDefault(string(r.Default), string(ActionAsk)))
	t.out.Permissions.Rules = t.rules("permissions.rules", p.Rules, p.Rules, r.Rules, false)
	names := union(slices.Sorted(maps.Keys(p.Agents)), slices.Sorted(maps.Keys(r.Agents)))
	t.out.Permissions.Agents = nil
	for _, name := range names {
		if t.out.Permissions.Agents == nil {
			t.out.Permissions.Agents = map[string][]PermissionRule{}
		}
		// An agent's own rules replace the global rules with the same tool
		// and pattern, so a child's agent rule is judged against every rule
		// the parent applies to that agent.
		applied, _ := p.RulesFor(name)
		t.out.Permissions.Agents[name] = t.rules(keyPath("agent", name, "permission", "rules"), p.Agents[name], applied, r.Agents[name], true)
	}
	for name, d := range r.AgentDefaults {
		_, pd := p.RulesFor(name)
		t.enum(keyPath("agent", name, "permission", "default"), string(pd), string(d))
	}
	for name, d := range p.AgentDefaults {
		if _, ok := r.AgentDefaults[name]; !ok {
			if t.out.Permissions.AgentDefaults == nil {
				t.out.Permissions.AgentDefaults = map[string]Action{}
			}
			t.out.Permissions.AgentDefaults[name] = d
		}
	}
}

// rules returns the parent's own rules at one level (own) followed by the
// child's rules it does not already have. applied are the rules the parent
// enforces at that level: a child allow rule not among them is a widening,
// and so, where a rule replaces applied rules of the same tool and pattern
// (replaces: agent overrides), is a child rule looser than the one it
// would replace.
func (t *tightener) rules(key string, own, applied, child []PermissionRule, replaces bool) []PermissionRule {
	out := slices.Clone(own)
	for _, c := range child {
		if slices.ContainsFunc(own, func(x PermissionRule) bool { return sameRule(x, c) }) {
			continue
		}
		if c.Action == ActionAllow && !slices.ContainsFunc(applied, func(x PermissionRule) bool { return sameRule(x, c) }) {
			t.widen(key, fmt.Sprintf("allow %s %q", c.Tool, c.Pattern), "no such allow rule")
			continue
		}
		if replaces {
			if i := slices.IndexFunc(applied, func(x PermissionRule) bool {
				return strings.EqualFold(x.Tool, c.Tool) && x.Pattern == c.Pattern && strictness(x.Action) > strictness(c.Action)
			}); i >= 0 {
				t.widen(key, fmt.Sprintf("%s %s %q", c.Action, c.Tool, c.Pattern), fmt.Sprintf("%s %s %q", applied[i].Action, applied[i].Tool, applied[i].Pattern))
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

func sameRule(a, b PermissionRule) bool {
	return strings.EqualFold(a.Tool, b.Tool) && a.Pattern == b.Pattern && a.Action == b.Action
}

// underAny reports whether path is at or below one of roots.
func underAny(path string, roots []Anchor) bool {
	return slices.ContainsFunc(roots, func(a Anchor) bool { return within(a.Path, path) })
}

// coversRule reports whether parent admits every destination child does.
func coversRule(parent, child NetRule) bool {
	if !portsCover(parent.Ports, child.Ports) {
		return false
	}
	switch {
	case parent.Host != "" && child.Host != "":
		return hostCovers(parent.Host, child.Host)
	case parent.Host == "" && child.Host == "":
		return parent.Prefix.Bits() <= child.Prefix.Bits() && parent.Prefix.Contains(child.Prefix.Addr())
	}
	// A hostname against an address prefix: what the name resolves to is
	// not known now, so it is not covered (fail closed).
	return false
}

// hostCovers reports whether host pattern p admits every name pattern c
// admits ("*." = one more label, "**." = one or more).
func hostCovers(p, c string) bool {
	if p == c {
		return true
	}
	switch {
	case strings.HasPrefix(c, "**."):
		// Only a ** pattern on the same or a parent domain covers any depth.
		return strings.HasPrefix(p, "**.") && (c[3:] == p[3:] || strings.HasSuffix(c[3:], "."+p[3:]))
	case strings.HasPrefix(c, "*."):
		if strings.HasPrefix(p, "**.") {
			return c[2:] == p[3:] || strings.HasSuffix(c[2:], "."+p[3:])
		}
		return false // "*.a" covers "*.a" only (p == c above)
	}
	return MatchHost(p, c)
}

// portsCover reports whether parent's port ranges (none = every port)
// contain every port of child's.
func portsCover(parent, child []PortRange) bool {
	if len(parent) == 0 {
		return true
	}
	if len(child) == 0 {
		return false
	}
	for _, c := range child {
		// Walk the child range through the parent ranges (they may touch).
		next := uint32(c.First)
		for progressed := true; progressed && next <= uint32(c.Last); {
			progressed = false
			for _, p := range parent {
				if uint32(p.First) <= next && next <= uint32(p.Last) {
					next = uint32(p.Last) + 1
					progressed = true
				}
			}
		}
		if next <= uint32(c.Last) {
			return false
		}
	}
	return true
}

// FormatNetRule renders a rule the way ParseNetRule reads it.
func FormatNetRule(r NetRule) string {
	dest := r.Host
	if dest == "" {
		dest = r.Prefix.String()
		if r.Prefix.Addr().Is4() && r.Prefix.Bits() == 32 || r.Prefix.Addr().Is6() && r.Prefix.Bits() == 128 {
			dest = r.Prefix.Addr().String()
		}
		if r.Prefix.Addr().Is6() && len(r.Ports) > 0 {
			dest = "[" + dest + "]"
		}
	}
	if len(r.Ports) == 0 {
		return dest
	}
	ports := make([]string, len(r.Ports))
	for i, p := range r.Ports {
		ports[i] = strconv.Itoa(int(p.First))
		if p.Last != p.First {
			ports[i] += "-" + strconv.Itoa(int(p.Last))
		}
	}
	return dest + ":" + strings.Join(ports, ",")
}

func union[T comparable](a, b []T) []T {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func unionAnchors(a, b []Anchor) []Anchor {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.ContainsFunc(out, func(y Anchor) bool { return y.Path == x.Path }) {
			out = append(out, x)
		}
	}
	return out
}

func fmtList[T ~string](l []T) string {
	if len(l) == 0 {
		return "none"
	}
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = strconv.Quote(string(s))
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func anchorList(as []Anchor) string {
	paths := make([]string, len(as))
	for i, a := range as {
		paths[i] = a.Path
	}
	return fmtList(paths)
}

func netRuleList(rs []NetRule) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = FormatNetRule(r)
	}
	return fmtList(out)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// cloneCompiled copies c deeply enough that changing the copy's slices
// and maps leaves c alone.
func cloneCompiled(c *Compiled) *Compiled {
	out := *c
	out.AllowedModes = slices.Clone(c.AllowedModes)
	out.WritableRoots = slices.Clone(c.WritableRoots)
	out.ReadableRoots = slices.Clone(c.ReadableRoots)
	out.ProtectedPatterns = slices.Clone(c.ProtectedPatterns)
	out.ProtectedPaths = slices.Clone(c.ProtectedPaths)
	out.DenyRead = slices.Clone(c.DenyRead)
	out.DenyReadGlobs = slices.Clone(c.DenyReadGlobs)
	out.boundGlobs = nil // they describe the tree at c's bind, not the copy's
	out.Network.Allow = slices.Clone(c.Network.Allow)
	out.Network.AllowUnixSockets = slices.Clone(c.Network.AllowUnixSockets)
	out.ExcludedCommands = slices.Clone(c.ExcludedCommands)
	out.Env.Scrub = slices.Clone(c.Env.Scrub)
	out.Env.Passthrough = slices.Clone(c.Env.Passthrough)
	out.Env.Set = slices.Clone(c.Env.Set)
	out.Capabilities = slices.Clone(c.Capabilities)
	out.Require = slices.Clone(c.Require)
	out.Permissions.Rules = slices.Clone(c.Permissions.Rules)
	out.Permissions.Agents = maps.Clone(c.Permissions.Agents)
	out.Permissions.AgentDefaults = maps.Clone(c.Permissions.AgentDefaults)
	out.Locked = slices.Clone(c.Locked)
	return &out
}

// Stricter reports whether a is a stricter verdict than b (deny > ask >
// allow), the order Permissions.Check combines commands in.
func (a Action) Stricter(b Action) bool { return strictness(a) > strictness(b) }
