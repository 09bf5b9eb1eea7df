package policy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// resolve is the resolve step: the layers in order, then the flags, then
// the checks that span layers; resolveMerged compiles the result.
func resolve(opts LoadOptions) (*Resolved, *Effective, error) {
	if opts.ManagedDir == "" {
		opts.ManagedDir = DefaultManagedDir
	}
	if opts.Env == nil {
		opts.Env = os.Getenv
	}
	if opts.Warn == nil {
		opts.Warn = io.Discard
	}
	if opts.Home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, nil, fmt.Errorf("policy: find home directory: %w", err)
		}
		opts.Home = h
	}
	ws, wsSrc, err := resolveWorkspace(opts)
	if err != nil {
		return nil, nil, err
	}

	files, err := layerFiles(opts, ws.Path)
	if err != nil {
		return nil, nil, err
	}
	m := newMerged()
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return nil, nil, fmt.Errorf("policy: read %s: %w", f.path, err)
		}
		d, err := opts.ParseCache.parse(f.path, data)
		if err != nil {
			return nil, nil, err
		}
		l, err := decodeLayer(d, f.managed)
		if err != nil {
			return nil, nil, err
		}
		if f.workspace {
			warnLoosening(opts.Warn, m, l)
		}
		if err := m.apply(l); err != nil {
			return nil, nil, err
		}
		m.files = append(m.files, f.path)
	}
	m.seal()
	pl, ap, err := profileLayer(opts, m, ws.Path)
	if err != nil {
		return nil, nil, err
	}
	if pl != nil {
		if err := m.apply(pl); err != nil {
			return nil, nil, err
		}
	}
	fl, err := flagLayer(opts, m)
	if err != nil {
		return nil, nil, err
	}
	if err := m.apply(fl); err != nil {
		return nil, nil, err
	}
	mode := m.get("sandbox.mode")
	allowed := m.get("sandbox.allowed_modes")
	if !slices.Contains(allowed.val.([]string), mode.val.(string)) {
		return nil, nil, &Error{Pos: posOrSrc(mode), Msg: fmt.Sprintf("sandbox mode %q is not allowed by policy", mode.val), Related: ptr(posOrSrc(allowed)), RelatedWhat: "allowed_modes set at", Hint: "allowed modes: " + fmtVal(allowed.val)}
	}
	if opts.Flags.changed(FlagYolo) {
		fmt.Fprintln(opts.Warn, "oxsupervise: WARNING: --yolo disables the sandbox AND every approval: the agent can read your credentials, change any file you can, and reach any host")
	} else if Mode(mode.val.(string)) == ModeFullAccess {
		fmt.Fprintf(opts.Warn, "oxsupervise: WARNING: sandbox mode full-access (from %s): no filesystem or network confinement, credentials are readable; only use this inside an environment that is already isolated\n", mode.source())
	}
	r, err := resolveMerged(m, opts, ws)
	if err != nil {
		return nil, nil, err
	}
	r.base.Agent = ap
	citeGrants(&r.base, ap)
	r.base.Env.Set = m.agentEnv()
	eff := m.effective()
	m.agentEffective(eff, ap)
	eff.Values = append(eff.Values, EffectiveValue{Key: "workspace", Value: ws.Path, Source: wsSrc})
	sort.SliceStable(eff.Values, func(i, j int) bool { return eff.Values[i].Key < eff.Values[j].Key })
	return r, eff, nil
}

type layerFile struct {
	path    string
	managed bool
	// workspace marks <workspace>/.openoxide/config.toml, which arrives
	// with the repository and so is not necessarily the user's own words.
	workspace bool
}

// layerFiles lists the policy files in precedence order (lowest first).
// Missing optional files are skipped; a missing --config file is an error.
func layerFiles(opts LoadOptions, workspace string) ([]layerFile, error) {
	var out []layerFile
	exists := func(p string) (bool, error) {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("policy: %w", err)
		}
		if st.IsDir() {
			return false, fmt.Errorf("policy: %s is a directory, expected a TOML file", p)
		}
		return true, nil
	}
	add := func(p string, managed bool) error {
		ok, err := exists(p)
		if ok {
			out = append(out, layerFile{path: p, managed: managed})
		}
		return err
	}
	if err := add(filepath.Join(opts.ManagedDir, "policy.toml"), true); err != nil {
		return nil, err
	}
	dropins, err := filepath.Glob(filepath.Join(opts.ManagedDir, "policy.d", "*.toml"))
	if err != nil {
		return nil, fmt.Errorf("policy: list policy.d: %w", err)
	}
	sort.Strings(dropins)
	for _, p := range dropins {
		if err := add(p, true); err != nil {
			return nil, err
		}
	}
	if err := add(filepath.Join(opts.Home, ".openoxide", "config.toml"), false); err != nil {
		return nil, err
	}
	if err := add(filepath.Join(workspace, ".openoxide", "config.toml"), false); err != nil {
		return nil, err
	}
	if n := len(out); n > 0 && out[n-1].path == filepath.Join(workspace, ".openoxide", "config.toml") {
		out[n-1].workspace = true
	}
	if opts.Flags.changed(FlagConfig) {
		p, err := filepath.Abs(opts.Flags.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("policy: --config: %w", err)
		}
		ok, err := exists(p)
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		if !ok {
			return nil, &Error{Pos: pos{File: "flag --config"}, Msg: fmt.Sprintf("policy file %s does not exist", p)}
		}
		out = append(out, layerFile{path: p})
	}
	return out, nil
}

// resolveWorkspace finds the workspace: --workspace, else opts.Workspace,
// else the current directory. It must exist and be a directory.
func resolveWorkspace(opts LoadOptions) (Anchor, string, error) {
	dir, src := opts.Workspace, "option"
	if opts.Flags.changed(FlagWorkspace) {
		dir, src = opts.Flags.Workspace, "flag --"+FlagWorkspace
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return Anchor{}, "", fmt.Errorf("policy: workspace: current directory: %w", err)
		}
		dir, src = wd, "current directory"
	}
	abs, err := filepath.Abs(expandHome(dir, opts.Home))
	if err != nil {
		return Anchor{}, "", fmt.Errorf("policy: workspace %s: %w", dir, err)
	}
	a, err := resolveAnchor(abs, src)
	if err != nil {
		return Anchor{}, "", &Error{Pos: pos{File: src}, Msg: fmt.Sprintf("workspace %s: %v", abs, err)}
	}
	if !a.Exists {
		return Anchor{}, "", &Error{Pos: pos{File: src}, Msg: fmt.Sprintf("workspace %s does not exist", abs), Hint: "create it or pass --workspace DIR"}
	}
	if !a.Dir {
		return Anchor{}, "", &Error{Pos: pos{File: src}, Msg: fmt.Sprintf("workspace %s is not a directory", abs)}
	}
	return a, src, nil
}

// flagLayer turns the CLI flags into the last layer. List flags add to the
// effective lists rather than replacing them.
func flagLayer(opts LoadOptions, m *merged) (*layer, error) {
	l := newLayer("flags", false)
	f := opts.Flags
	if f == nil {
		return l, nil
	}
	flagErr := func(name, format string, args ...any) error {
		return &Error{Pos: pos{File: "flag --" + name}, Msg: fmt.Sprintf(format, args...)}
	}
	set := func(key, flag string, v any) {
		l.settings[key] = setting{val: v, src: "flag --" + flag}
	}
	if f.changed(FlagFullAuto) && f.changed(FlagYolo) {
		return nil, flagErr(FlagYolo, "--yolo and --full-auto contradict each other")
	}
	if f.changed(FlagSandbox) {
		if !slices.Contains(modeNames, f.Sandbox) {
			return nil, &Error{Pos: pos{File: "flag --sandbox"}, Msg: fmt.Sprintf("unknown sandbox mode %q", f.Sandbox), Hint: "one of: " + fmtVal(modeNames)}
		}
		set("sandbox.mode", FlagSandbox, f.Sandbox)
	}
	if f.changed(FlagFullAuto) {
		if f.changed(FlagSandbox) && f.Sandbox != string(ModeWorkspaceWrite) {
			return nil, flagErr(FlagFullAuto, "--full-auto means --sandbox workspace-write, but --sandbox %s was given", f.Sandbox)
		}
		set("sandbox.mode", FlagFullAuto, string(ModeWorkspaceWrite))
		set("sandbox.approval", FlagFullAuto, string(ApprovalOnRequest))
	}
	if f.changed(FlagYolo) {
		if f.changed(FlagSandbox) && f.Sandbox != string(ModeFullAccess) {
			return nil, flagErr(FlagYolo, "--yolo means --sandbox full-access, but --sandbox %s was given", f.Sandbox)
		}
		set("sandbox.mode", FlagYolo, string(ModeFullAccess))
		set("sandbox.approval", FlagYolo, string(ApprovalNever))
	}
	if f.changed(FlagWritableRoot) {
		roots := slices.Clone(m.strings("sandbox.writable_roots"))
		for _, r := range f.WritableRoots {
			if err := checkPath(r); err != nil {
				return nil, flagErr(FlagWritableRoot, "%v", err)
			}
			abs, err := filepath.Abs(expandHome(r, opts.Home))
			if err != nil {
				return nil, flagErr(FlagWritableRoot, "%v", err)
			}
			if !slices.Contains(roots, abs) {
				roots = append(roots, abs)
			}
		}
		s := m.get("sandbox.writable_roots")
		elems := make([]pos, 0, len(roots))
		for i := range roots {
			if i < len(s.val.([]string)) {
				elems = append(elems, pos{File: s.elemSource(i)})
			} else {
				elems = append(elems, pos{File: "flag --" + FlagWritableRoot})
			}
		}
		l.settings["sandbox.writable_roots"] = setting{val: roots, src: "flag --" + FlagWritableRoot, elems: elems}
	}
	if f.changed(FlagNet) {
		if !slices.Contains([]string{string(NetNone), string(NetAllowlist), string(NetFull)}, f.Net) {
			return nil, &Error{Pos: pos{File: "flag --net"}, Msg: fmt.Sprintf("unknown network policy %q", f.Net), Hint: "one of: none, allowlist, full"}
		}
		set("network.policy", FlagNet, f.Net)
	}
	if f.changed(FlagAllowNet) {
		allow := slices.Clone(m.strings("network.allow"))
		s := m.get("network.allow")
		var elems []pos
		for i := range allow {
			elems = append(elems, pos{File: s.elemSource(i)})
		}
		for _, e := range f.AllowNet {
			if _, err := ParseNetRule(e); err != nil {
				return nil, &Error{Pos: pos{File: "flag --allow-net"}, Msg: err.Error(), Hint: schema()["network.allow"].hint}
			}
			if !slices.Contains(allow, e) {
				allow = append(allow, e)
				elems = append(elems, pos{File: "flag --" + FlagAllowNet})
			}
		}
		l.settings["network.allow"] = setting{val: allow, src: "flag --" + FlagAllowNet, elems: elems}
		if !f.changed(FlagNet) && m.str("network.policy") == string(NetNone) {
			set("network.policy", FlagAllowNet, string(NetAllowlist))
		}
	}
	if f.changed(FlagAuditLog) {
		abs, err := filepath.Abs(f.AuditLog)
		if err != nil {
			return nil, flagErr(FlagAuditLog, "%v", err)
		}
		set("audit.path", FlagAuditLog, abs)
	}
	return l, nil
}

// warnLoosening says loudly when the workspace's own config loosens what
// the layers above it decided: that file comes with the repository, so a
// cloned project could otherwise widen its own sandbox unnoticed. Managed
// locks turn this into an error; without them it is a warning.
func warnLoosening(w io.Writer, m *merged, l *layer) {
	sch := schema()
	for _, key := range sortedKeys(l.settings) {
		s := l.settings[key]
		spec := sch[key]
		if cur := m.get(key); spec.looser(cur.val, s.val) {
			fmt.Fprintf(w, "oxsupervise: WARNING: %s: the workspace config loosens %s from %s (%s) to %s\n", s.source(), key, fmtVal(cur.val), cur.source(), fmtVal(s.val))
		}
	}
	for _, r := range l.rules {
		if r.Action == ActionAllow {
			fmt.Fprintf(w, "oxsupervise: WARNING: %s: the workspace config adds an allow rule (%s %q)\n", r.Source, r.Tool, r.Pattern)
		}
	}
	for _, name := range sortedKeys(l.agents) {
		for _, r := range l.agents[name].rules {
			if r.Action == ActionAllow {
				fmt.Fprintf(w, "oxsupervise: WARNING: %s: the workspace config adds an allow rule for agent %s (%s %q)\n", r.Source, name, r.Tool, r.Pattern)
			}
		}
	}
}
