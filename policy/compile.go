package policy

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/openoxide/oxsupervise/internal/shquote"
)

// maxScanEntries bounds the walk that turns protected patterns into
// existing paths; beyond it Compiled.ProtectedPathsComplete is false and a
// warning says so (the patterns themselves still cover everything).
const maxScanEntries = 200_000

// expandHome expands a leading ~ or ~/.
func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// absPath expands ~ and makes p absolute relative to base.
func absPath(p, home, base string) string {
	p = expandHome(p, home)
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}

// resolveAnchor resolves symlinks in p and records its identity. A path
// that does not exist yet keeps Exists=false, with its existing ancestors
// resolved, so path-based backends can still name it.
func resolveAnchor(p, src string) (Anchor, error) {
	resolved, err := filepath.EvalSymlinks(p)
	if err == nil {
		fi, err := os.Stat(resolved)
		if err != nil {
			return Anchor{}, fmt.Errorf("stat %s: %w", resolved, err)
		}
		dev, ino := fileID(fi)
		return Anchor{Path: resolved, Dev: dev, Ino: ino, Dir: fi.IsDir(), Exists: true, Source: src}, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return Anchor{}, fmt.Errorf("resolve %s: %w", p, err)
	}
	// Resolve the longest existing prefix; keep the rest literally.
	dir, rest := filepath.Dir(p), filepath.Base(p)
	for dir != filepath.Dir(dir) {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return Anchor{Path: filepath.Join(r, rest), Source: src}, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = filepath.Dir(dir)
	}
	return Anchor{Path: filepath.Join(dir, rest), Source: src}, nil
}

// lstatAnchor records the entry at p itself, never following a symlink.
func lstatAnchor(p, src string) (Anchor, fs.FileInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return Anchor{}, nil, err
	}
	dev, ino := fileID(fi)
	return Anchor{Path: p, Dev: dev, Ino: ino, Dir: fi.IsDir(), Exists: true, Source: src}, fi, nil
}

// gitVectors are the entries of a git directory that let whoever writes
// them run code (hooks, config's core.fsmonitor/core.hooksPath, alternate
// common dirs, info/ attributes and excludes filters).
var gitVectors = []string{"hooks", "config", "config.worktree", "commondir", "info"}

// defaultProtectedNames are protected at any depth below a writable root.
var defaultProtectedNames = []string{
	".openoxide", ".codex", ".agents", ".claude", ".cursor", ".vscode", ".idea",
	".mcp.json", ".envrc", ".gitmodules", "AGENTS.md", "CLAUDE.md", "CONTEXT.md",
}

// defaultProtectedPatterns returns DESIGN §2's protected set.
func defaultProtectedPatterns(protectGit string) []ProtectedPattern {
	var out []ProtectedPattern
	if protectGit == "all" {
		out = append(out, ProtectedPattern{Components: []string{".git"}, Type: EntryAny, Source: "default (protect_git = \"all\")"})
	} else {
		// A .git *file* points git at another directory (gitdir:); it must
		// not be rewritten, while a .git directory may be created (git init).
		out = append(out, ProtectedPattern{Components: []string{".git"}, Type: EntryFile, Source: "default"})
		// Submodule names may contain one slash level; nesting is covered two
		// deep. Deeper layouts are still caught by the compile-time scan
		// (ProtectedPaths) but not for entries created later.
		prefixes := [][]string{
			{".git"},
			{".git", "modules", "*"},
			{".git", "modules", "*", "*"},
			{".git", "modules", "*", "modules", "*"},
			{".git", "worktrees", "*"},
		}
		for _, p := range prefixes {
			for _, v := range gitVectors {
				out = append(out, ProtectedPattern{Components: append(slices.Clone(p), v), Type: EntryAny, Source: "default"})
			}
		}
	}
	for _, n := range defaultProtectedNames {
		out = append(out, ProtectedPattern{Components: []string{n}, Type: EntryAny, Source: "default"})
	}
	return out
}

// defaultDenyRead are credential locations below the home directory.
func defaultDenyRead() []string {
	list := []string{
		".ssh", ".aws", ".config/gcloud", ".azure", ".kube", ".docker/config.json",
		".npmrc", ".pypirc", ".netrc", ".gnupg", ".git-credentials", ".config/gh",
	}
	switch runtime.GOOS {
	case "darwin":
		list = append(list,
			"Library/Keychains",
			"Library/Application Support/Google/Chrome",
			"Library/Application Support/Chromium",
			"Library/Application Support/BraveSoftware",
			"Library/Application Support/Microsoft Edge",
			"Library/Application Support/Firefox",
			"Library/Safari",
			"Library/Cookies",
		)
	case "windows":
		list = append(list,
			"AppData/Local/Google/Chrome/User Data",
			"AppData/Local/Microsoft/Edge/User Data",
			"AppData/Local/BraveSoftware",
			"AppData/Roaming/Mozilla/Firefox",
		)
	default:
		list = append(list,
			".mozilla", ".config/google-chrome", ".config/chromium",
			".config/BraveSoftware", ".config/microsoft-edge", ".config/vivaldi",
			".config/opera", "snap/firefox", "snap/chromium",
		)
	}
	return list
}

// defaultScrub are environment names removed before `run` execs.
var defaultScrub = []string{
	"*_TOKEN", "*_SECRET", "*_SECRET_KEY", "*_SECRET_ACCESS_KEY", "*_PASSWORD", "*_PASSWD",
	"*_API_KEY", "*_APIKEY", "*_ACCESS_KEY", "*_PRIVATE_KEY", "*_CREDENTIALS", "*_AUTH",
	"AWS_*", "AZURE_*", "GOOGLE_APPLICATION_CREDENTIALS", "SSH_AUTH_SOCK", "GPG_AGENT_INFO",
	"VAULT_TOKEN", "NETRC", "DOCKER_AUTH_CONFIG",
}

// platformReadable are readable in restricted read mode on every run.
func platformReadable() []string {
	switch runtime.GOOS {
	case "darwin":
		return []string{"/usr", "/bin", "/sbin", "/System", "/Library", "/opt/homebrew", "/private/etc", "/private/var/db/timezone", "/dev"}
	case "windows":
		return nil
	}
	return []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store", "/proc", "/sys", "/dev", "/run"}
}

func compile(m *merged, opts LoadOptions, ws Anchor, wsSrc string) (*Compiled, error) {
	c := &Compiled{
		SchemaVersion:          CompiledSchemaVersion,
		Mode:                   Mode(m.str("sandbox.mode")),
		Approval:               Approval(m.str("sandbox.approval")),
		Workspace:              ws,
		ReadAccess:             ReadAccess(m.str("sandbox.read_only_access")),
		Locked:                 m.lockedNames(),
		ProtectedPathsComplete: true,
	}
	for _, s := range m.strings("sandbox.allowed_modes") {
		c.AllowedModes = append(c.AllowedModes, Mode(s))
	}
	c.FilesystemRules = c.Mode == ModeReadOnly || c.Mode == ModeWorkspaceWrite
	home := opts.Home
	if h, err := filepath.EvalSymlinks(home); err == nil {
		home = h
	}

	// Writable roots.
	c.WritableRoots = []Anchor{}
	if c.Mode == ModeWorkspaceWrite {
		add := func(a Anchor) {
			if !slices.ContainsFunc(c.WritableRoots, func(b Anchor) bool { return b.Path == a.Path }) {
				c.WritableRoots = append(c.WritableRoots, a)
			}
		}
		add(ws)
		s := m.get("sandbox.writable_roots")
		for i, r := range s.val.([]string) {
			a, err := resolveAnchor(absPath(r, opts.Home, ws.Path), s.elemSource(i))
			if err != nil {
				return nil, &Error{Pos: pos{File: s.elemSource(i)}, Msg: fmt.Sprintf("writable root %s: %v", r, err)}
			}
			if !a.Exists || !a.Dir {
				return nil, &Error{Pos: pos{File: s.elemSource(i)}, Msg: fmt.Sprintf("writable root %s (%s) is not an existing directory", r, a.Path), Hint: "create it first or remove it from the policy"}
			}
			add(a)
		}
		if !m.boolean("sandbox.exclude_slash_tmp") {
			if a, err := resolveAnchor("/tmp", "default (/tmp; exclude with sandbox.exclude_slash_tmp)"); err == nil && a.Exists && a.Dir {
				add(a)
			}
		}
		if !m.boolean("sandbox.exclude_tmpdir_env_var") {
			if t := opts.Env("TMPDIR"); t != "" {
				a, err := resolveAnchor(t, "env TMPDIR")
				switch {
				case !filepath.IsAbs(t):
					fmt.Fprintf(opts.Warn, "oxsupervise: warning: TMPDIR=%q is not absolute; not made writable\n", t)
				case err != nil || !a.Exists || !a.Dir:
					fmt.Fprintf(opts.Warn, "oxsupervise: warning: TMPDIR=%q is not an existing directory; not made writable\n", t)
				default:
					add(a)
				}
			}
		}
	}

	// Readable roots.
	if c.ReadAccess == ReadAccessRestricted {
		s := m.get("sandbox.readable_roots")
		for i, r := range s.val.([]string) {
			a, err := resolveAnchor(absPath(r, opts.Home, ws.Path), s.elemSource(i))
			if err != nil {
				return nil, &Error{Pos: pos{File: s.elemSource(i)}, Msg: fmt.Sprintf("readable root %s: %v", r, err)}
			}
			if !a.Exists {
				return nil, &Error{Pos: pos{File: s.elemSource(i)}, Msg: fmt.Sprintf("readable root %s (%s) does not exist", r, a.Path)}
			}
			c.ReadableRoots = append(c.ReadableRoots, a)
		}
		for _, p := range platformReadable() {
			if a, err := resolveAnchor(p, "default (platform)"); err == nil && a.Exists {
				if !slices.ContainsFunc(c.ReadableRoots, func(b Anchor) bool { return b.Path == a.Path }) {
					c.ReadableRoots = append(c.ReadableRoots, a)
				}
			}
		}
	}

	// Protected patterns and paths.
	c.ProtectedPatterns = defaultProtectedPatterns(m.str("sandbox.protect_git"))
	c.ProtectedPaths = []Anchor{}
	ps := m.get("sandbox.protected_subpaths")
	var explicit []Anchor
	for i, p := range ps.val.([]string) {
		src := ps.elemSource(i)
		if filepath.IsAbs(p) || strings.HasPrefix(p, "~") {
			explicit = append(explicit, Anchor{Path: absPath(p, opts.Home, ws.Path), Source: src})
			continue
		}
		comps := strings.Split(filepath.ToSlash(filepath.Clean(p)), "/")
		c.ProtectedPatterns = append(c.ProtectedPatterns, ProtectedPattern{Components: comps, Type: EntryAny, Source: src})
	}
	if c.FilesystemRules && c.Mode == ModeWorkspaceWrite {
		sc := scanner{c: c, warn: opts, limit: maxScanEntries}
		for _, a := range explicit {
			if err := sc.protectExplicit(a); err != nil {
				return nil, err
			}
		}
		for _, root := range c.WritableRoots {
			if root.Source != ws.Source && (strings.HasPrefix(root.Source, "default (/tmp") || root.Source == "env TMPDIR") {
				continue // scanning shared temp dirs is slow and racy; patterns cover them
			}
			if err := sc.scan(root.Path); err != nil {
				return nil, err
			}
		}
	}

	// Denied reads.
	c.DenyRead = []Anchor{}
	if c.Mode != ModeFullAccess {
		for _, p := range defaultDenyRead() {
			a, err := resolveAnchor(filepath.Join(home, filepath.FromSlash(p)), "default")
			if err != nil {
				return nil, fmt.Errorf("policy: deny-read %s: %w", p, err)
			}
			c.DenyRead = appendDeny(c.DenyRead, a, filepath.Join(home, filepath.FromSlash(p)))
		}
		s := m.get("sandbox.deny_read")
		for i, p := range s.val.([]string) {
			abs := absPath(p, opts.Home, ws.Path)
			a, err := resolveAnchor(abs, s.elemSource(i))
			if err != nil {
				return nil, &Error{Pos: pos{File: s.elemSource(i)}, Msg: fmt.Sprintf("deny_read %s: %v", p, err)}
			}
			c.DenyRead = appendDeny(c.DenyRead, a, abs)
		}
		c.DenyReadGlobs = []NameGlob{{Within: ws.Path, Include: ".env*", Exclude: []string{".env.example"}, Source: "default"}}
	}

	// Network.
	c.Network = Network{
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
		return nil, &Error{Pos: pos{File: askTimeout.source()}, Msg: fmt.Sprintf("network.ask_timeout_seconds = %d: must be between 1 and %d", v, MaxAskTimeoutSeconds)}
	}
	c.Network.AskTimeoutSeconds = uint32(askTimeout.val.(int64))
	if c.Mode == ModeFullAccess {
		c.Network.Policy = NetFull
		c.Network.Loopback = LoopbackAll
	}
	if c.Network.Policy == NetAllowlist {
		s := m.get("network.allow")
		for i, e := range s.val.([]string) {
			r, err := ParseNetRule(e)
			if err != nil {
				return nil, &Error{Pos: pos{File: s.elemSource(i)}, Msg: err.Error()}
			}
			r.Source = s.elemSource(i)
			c.Network.Allow = append(c.Network.Allow, r)
		}
	}
	for _, p := range m.strings("network.allow_unix_sockets") {
		c.Network.AllowUnixSockets = append(c.Network.AllowUnixSockets, absPath(p, opts.Home, ws.Path))
	}

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

	c.Permissions = Permissions{Default: Action(m.str("permissions.default")), Rules: slices.Clone(m.rules)}
	if len(m.agents) > 0 {
		c.Permissions.Agents = map[string][]PermissionRule{}
		c.Permissions.AgentDefaults = map[string]Action{}
		for name, a := range m.agents {
			c.Permissions.Agents[name] = slices.Clone(a.rules)
			if a.def != nil {
				c.Permissions.AgentDefaults[name] = Action(a.def.val.(string))
			}
		}
		if len(c.Permissions.AgentDefaults) == 0 {
			c.Permissions.AgentDefaults = nil
		}
	}
	return c, nil
}

// appendDeny adds a deny-read anchor, plus the unresolved path when it
// differs (a symlinked ~/.ssh is denied under both names).
func appendDeny(list []Anchor, a Anchor, literal string) []Anchor {
	has := func(p string) bool { return slices.ContainsFunc(list, func(b Anchor) bool { return b.Path == p }) }
	if !has(a.Path) {
		list = append(list, a)
	}
	if literal != a.Path && !has(literal) {
		if l, _, err := lstatAnchor(literal, a.Source); err == nil {
			list = append(list, l)
		}
	}
	return list
}

// scanner finds the existing entries protected patterns resolve to.
type scanner struct {
	c       *Compiled
	warn    LoadOptions
	entries int
	limit   int
}

func (s *scanner) addPath(a Anchor) {
	if !slices.ContainsFunc(s.c.ProtectedPaths, func(b Anchor) bool { return b.Path == a.Path && b.Ino == a.Ino }) {
		s.c.ProtectedPaths = append(s.c.ProtectedPaths, a)
	}
}

// matchPattern reports the pattern whose components end at rel's last
// components, respecting the entry type.
func (s *scanner) matchPattern(rel []string, isDir bool) *ProtectedPattern {
	return s.c.ProtectedMatch(rel, isDir)
}

func (s *scanner) scan(root string) error {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			// Unreadable subtrees cannot hold entries we must find to
			// protect writes the agent could not make either.
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if path == root {
			return nil
		}
		s.entries++
		if s.entries > s.limit {
			s.c.ProtectedPathsComplete = false
			fmt.Fprintf(s.warn.Warn, "oxsupervise: warning: stopped scanning %s for protected entries after %d entries; protection of not-yet-listed entries relies on name patterns\n", root, s.limit)
			return fs.SkipAll
		}
		rel, _ := filepath.Rel(root, path)
		comps := strings.Split(filepath.ToSlash(rel), "/")
		isLink := d.Type()&fs.ModeSymlink != 0
		if d.Name() == ".git" && d.Type().IsRegular() {
			if err := s.gitFile(root, path); err != nil {
				return err
			}
		}
		if p := s.matchPattern(comps, d.IsDir()); p != nil || (isLink && s.matchPattern(comps, true) != nil) {
			if p == nil {
				p = s.matchPattern(comps, true)
			}
			if err := s.protect(root, path, isLink, p.Source); err != nil {
				return err
			}
			if d.IsDir() {
				return fs.SkipDir // everything below is protected already
			}
			return nil
		}
		if d.IsDir() && len(comps) >= 2 && comps[len(comps)-2] == ".git" && (d.Name() == "objects" || d.Name() == "lfs") {
			return fs.SkipDir
		}
		return nil
	})
	var perr *Error
	if errors.As(err, &perr) {
		return perr
	}
	if err != nil {
		return fmt.Errorf("policy: scan %s for protected entries: %w", root, err)
	}
	return nil
}

// protect records a protected entry. A symlink is recorded as the link
// itself and never followed for writes; one that leaves its root is refused
// because the protection would silently apply to the wrong place.
func (s *scanner) protect(root, path string, isLink bool, src string) error {
	a, _, err := lstatAnchor(path, src)
	if err != nil {
		return fmt.Errorf("policy: protected entry %s: %w", path, err)
	}
	s.addPath(a)
	if !isLink {
		return nil
	}
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Error{Pos: pos{File: path}, Msg: "protected name is a dangling symlink", Hint: "remove it: rm " + shquote.Quote(path)}
	}
	if err != nil {
		return &Error{Pos: pos{File: path}, Msg: fmt.Sprintf("protected name is a symlink that cannot be resolved: %v", err)}
	}
	if !within(root, target) {
		return &Error{Pos: pos{File: path}, Msg: fmt.Sprintf("protected name is a symlink to %s, outside the writable root %s", target, root), Hint: "replace the symlink with the real entry (oxsupervise will not guess what to protect): rm " + shquote.Quote(path) + " && cp -a " + shquote.Quote(target) + " " + shquote.Quote(path)}
	}
	t, err := resolveAnchor(target, src+" (symlink target)")
	if err != nil {
		return err
	}
	s.addPath(t)
	return nil
}

func (s *scanner) protectExplicit(a Anchor) error {
	fi, err := os.Lstat(a.Path)
	if errors.Is(err, fs.ErrNotExist) {
		r, err := resolveAnchor(a.Path, a.Source)
		if err != nil {
			return err
		}
		s.addPath(r)
		return nil
	}
	if err != nil {
		return fmt.Errorf("policy: protected path %s: %w", a.Path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return s.protect(filepath.Dir(a.Path), a.Path, true, a.Source)
	}
	r, err := resolveAnchor(a.Path, a.Source)
	if err != nil {
		return err
	}
	s.addPath(r)
	return nil
}

// gitFile protects what a `.git` file's gitdir: line points at: the code
// execution vectors of that git directory (or all of it under
// protect_git = "all"), and those of its commondir.
func (s *scanner) gitFile(root, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // unreadable: git cannot use it either
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	line = strings.TrimSpace(line)
	target, ok := strings.CutPrefix(line, "gitdir:")
	if !ok {
		return nil
	}
	target = strings.TrimSpace(target)
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(path), target)
	}
	return s.protectGitDir(target, path+" gitdir", 0)
}

func (s *scanner) protectGitDir(dir, src string, depth int) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil // gitdir points nowhere yet; the patterns cover a later one
	}
	all := slices.ContainsFunc(s.c.ProtectedPatterns, func(p ProtectedPattern) bool {
		return len(p.Components) == 1 && p.Components[0] == ".git" && p.Type == EntryAny
	})
	if all {
		a, err := resolveAnchor(resolved, src)
		if err != nil {
			return err
		}
		s.addPath(a)
		return nil
	}
	for _, v := range gitVectors {
		p := filepath.Join(resolved, v)
		a, fi, err := lstatAnchor(p, src)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return &Error{Pos: pos{File: p}, Msg: "git control entry is a symlink", Hint: "replace it with the real file; oxsupervise does not follow symlinks at protected names"}
		}
		s.addPath(a)
	}
	if depth == 0 {
		if b, err := os.ReadFile(filepath.Join(resolved, "commondir")); err == nil {
			common := strings.TrimSpace(string(b))
			if !filepath.IsAbs(common) {
				common = filepath.Join(resolved, common)
			}
			return s.protectGitDir(common, src+" commondir", 1)
		}
	}
	return nil
}

// within reports whether p is root or below it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
