package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Resolved is a policy after the resolve step: every layer file read and
// decoded, merged under the managed locks, the flags applied, and every
// value that needs no filesystem checked and compiled (modes, network
// rules, limits, environment, permission rules). Beyond the layer files and
// the workspace directory itself (it must exist; its config file is a
// layer) the resolve step has not looked at the filesystem: the paths a
// session's boundary is built from are absolute but neither
// symlink-resolved nor identified, and no writable root has been scanned for
// protected entries. Bind does that, when a session is built.
//
// Permission questions (`policy check`, asked on every tool call of an
// agent) need nothing more than a Resolved.
type Resolved struct {
	// Permissions are the application-layer rules Permissions.Check
	// evaluates.
	Permissions Permissions

	// base holds every field of the compiled policy the resolve step
	// decides; Bind copies it and fills in the filesystem anchors.
	base Compiled
	ws   Anchor
	opts LoadOptions

	// Paths as the layers wrote them, made absolute (~ expanded, relative
	// to the workspace), each with the file:line or flag that set it.
	writableRoots []pathEntry
	readableRoots []pathEntry
	denyRead      []pathEntry
	// protectedPaths are the absolute entries of sandbox.protected_subpaths;
	// relative ones became ProtectedPatterns.
	protectedPaths []pathEntry
	// slashTmp and tmpdirEnv say whether /tmp and $TMPDIR join the
	// writable roots (when they are existing directories at bind time).
	slashTmp, tmpdirEnv bool
}

// pathEntry is a path from the policy before the filesystem is consulted.
type pathEntry struct {
	// raw is the value as written, for error messages.
	raw    string
	path   string
	source string
}

// Resolve runs the resolve step: it reads every policy layer (managed
// policy.toml and policy.d/*.toml, ~/.openoxide/config.toml,
// <workspace>/.openoxide/config.toml, --config, CLI flags), merges them
// under the managed locks and checks every value, without walking or
// identifying any path the policy names. Errors are those of Load that do
// not depend on the filesystem, with the same file:line:col.
func Resolve(opts LoadOptions) (*Resolved, *Effective, error) {
	return resolve(opts)
}

// resolveMerged compiles what the merged layers say into the fields of the
// policy that need no filesystem, and keeps the paths for Bind.
func resolveMerged(m *merged, opts LoadOptions, ws Anchor) (*Resolved, error) {
	c := Compiled{
		SchemaVersion: CompiledSchemaVersion,
		Mode:          Mode(m.str("sandbox.mode")),
		Approval:      Approval(m.str("sandbox.approval")),
		Workspace:     ws,
		ReadAccess:    ReadAccess(m.str("sandbox.read_only_access")),
		Locked:        m.lockedNames(),
	}
	for _, s := range m.strings("sandbox.allowed_modes") {
		c.AllowedModes = append(c.AllowedModes, Mode(s))
	}
	c.FilesystemRules = c.Mode == ModeReadOnly || c.Mode == ModeWorkspaceWrite
	r := &Resolved{ws: ws, opts: opts}
	entries := func(key string) []pathEntry {
		s := m.get(key)
		var out []pathEntry
		for i, p := range s.val.([]string) {
			out = append(out, pathEntry{raw: p, path: absPath(p, opts.Home, ws.Path), source: s.elemSource(i)})
		}
		return out
	}

	if c.Mode == ModeWorkspaceWrite {
		r.writableRoots = entries("sandbox.writable_roots")
		r.slashTmp = !m.boolean("sandbox.exclude_slash_tmp")
		r.tmpdirEnv = !m.boolean("sandbox.exclude_tmpdir_env_var")
	}
	if c.ReadAccess == ReadAccessRestricted {
		r.readableRoots = entries("sandbox.readable_roots")
	}

	// Protected patterns: the built-in set and the relative entries of
	// protected_subpaths; the absolute ones are paths for Bind.
	c.ProtectedPatterns = defaultProtectedPatterns(m.str("sandbox.protect_git"))
	ps := m.get("sandbox.protected_subpaths")
	for i, p := range ps.val.([]string) {
		src := ps.elemSource(i)
		if filepath.IsAbs(p) || strings.HasPrefix(p, "~") {
			r.protectedPaths = append(r.protectedPaths, pathEntry{raw: p, path: absPath(p, opts.Home, ws.Path), source: src})
			continue
		}
		comps := strings.Split(filepath.ToSlash(filepath.Clean(p)), "/")
		if slices.ContainsFunc(c.ProtectedPatterns, func(q ProtectedPattern) bool {
			return q.Type == EntryAny && slices.Equal(q.Components, comps)
		}) {
			continue // a built-in already (an agent profile's rule file): its reason stays
		}
		reason := "listed in sandbox.protected_subpaths"
		if isProfileSource(src) {
			reason = "a rule file of the agent's profile"
		}
		c.ProtectedPatterns = append(c.ProtectedPatterns, ProtectedPattern{Components: comps, Type: EntryAny, Source: src, Reason: reason})
	}

	if c.Mode != ModeFullAccess {
		r.denyRead = entries("sandbox.deny_read")
		c.DenyReadGlobs = []NameGlob{{Within: ws.Path, Include: ".env*", Exclude: []string{".env.example"}, Source: "default"}}
	}

	network, err := resolveNetwork(m, opts, ws, c.Mode)
	if err != nil {
		return nil, err
	}
	c.Network = network

	c.Capabilities = compileCapabilities(m)
	c.Require = compileRequirements(m)
	c.ExcludedCommands = slices.Clone(m.strings("sandbox.excluded_commands"))
	c.AllowUnsandboxedCommands = m.boolean("sandbox.allow_unsandboxed_commands")
	if !c.AllowUnsandboxedCommands {
		c.ExcludedCommands = nil
	}
	c.Env = Env{Scrub: slices.Clone(defaultScrub)}
	for _, s := range m.strings("env.scrub") {
		if !slices.Contains(c.Env.Scrub, s) {
			c.Env.Scrub = append(c.Env.Scrub, s)
		}
	}
	c.Env.Passthrough = slices.Clone(m.strings("env.passthrough"))
	c.Limits = Limits{PidsMax: m.integer("limits.pids_max"), MemoryMax: m.integer("limits.memory_max")}
	audit := absPath(m.str("audit.path"), opts.Home, ws.Path)
	c.Audit = Audit{Path: audit, Journald: m.boolean("audit.journald"), KernelBuffer: m.integer("audit.kernel_buffer")}
	c.Permissions = resolvePermissions(m)

	r.base = c
	r.Permissions = c.Permissions
	return r, nil
}

// resolveNetwork compiles the [network] table: the resolver keys, the
// allow entries (parsed, so a bad entry fails here with its file:line:col)
// and the unix sockets, relative to the workspace.
func resolveNetwork(m *merged, opts LoadOptions, ws Anchor, mode Mode) (Network, error) {
	n := Network{
		Policy:        NetPolicy(m.str("network.policy")),
		Loopback:      Loopback(m.str("network.loopback")),
		MinTTLSeconds: uint32(min(m.integer("network.min_ttl_seconds"), 1<<31)),
		MaxTTLSeconds: uint32(min(m.integer("network.max_ttl_seconds"), 1<<31)),
		UnknownHosts:  UnknownHosts(m.str("network.unknown_hosts")),
	}
	// 0 would mean "wait forever" to a reader, and a held query must
	// always end.
	askTimeout := m.get("network.ask_timeout_seconds")
	if v := askTimeout.val.(int64); v < 1 || v > MaxAskTimeoutSeconds {
		return Network{}, &Error{Pos: pos{File: askTimeout.source()}, Msg: fmt.Sprintf("network.ask_timeout_seconds = %d: must be between 1 and %d", v, MaxAskTimeoutSeconds)}
	}
	n.AskTimeoutSeconds = uint32(askTimeout.val.(int64))
	if mode == ModeFullAccess {
		n.Policy = NetFull
		n.Loopback = LoopbackAll
	}
	if n.Policy == NetAllowlist {
		s := m.get("network.allow")
		for i, e := range s.val.([]string) {
			r, err := ParseNetRule(e)
			if err != nil {
				return Network{}, &Error{Pos: pos{File: s.elemSource(i)}, Msg: err.Error()}
			}
			r.Source = s.elemSource(i)
			n.Allow = append(n.Allow, r)
		}
	}
	for _, p := range m.strings("network.allow_unix_sockets") {
		n.AllowUnixSockets = append(n.AllowUnixSockets, absPath(p, opts.Home, ws.Path))
	}
	return n, nil
}

// resolvePermissions collects the permission rules of every layer and the
// agents' own rules and defaults.
func resolvePermissions(m *merged) Permissions {
	p := Permissions{Default: Action(m.str("permissions.default")), Rules: slices.Clone(m.rules)}
	if len(m.agents) == 0 {
		return p
	}
	p.Agents = map[string][]PermissionRule{}
	p.AgentDefaults = map[string]Action{}
	for name, a := range m.agents {
		p.Agents[name] = slices.Clone(a.rules)
		if a.def != nil {
			p.AgentDefaults[name] = Action(a.def.val.(string))
		}
	}
	if len(p.AgentDefaults) == 0 {
		p.AgentDefaults = nil
	}
	return p
}
