package policy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// fixture is a throw-away managed dir, home and workspace.
type fixture struct {
	root, managed, home, ws string
	env                     map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	f := &fixture{root: root, managed: filepath.Join(root, "etc"), home: filepath.Join(root, "home"), ws: filepath.Join(root, "ws"), env: map[string]string{}}
	for _, d := range []string{f.managed, f.home, f.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// write creates root/rel (rel may start with etc/, home/, ws/).
func (f *fixture) write(t *testing.T, rel, content string) string {
	t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) mkdir(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) load(t *testing.T, args ...string) (*Compiled, *Effective, string, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fl := RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse flags %v: %v", args, err)
	}
	var warn bytes.Buffer
	c, e, err := Load(LoadOptions{
		ManagedDir: f.managed,
		Home:       f.home,
		Workspace:  f.ws,
		Flags:      fl,
		Env:        func(k string) string { return f.env[k] },
		Warn:       &warn,
	})
	return c, e, warn.String(), err
}

func (f *fixture) mustLoad(t *testing.T, args ...string) (*Compiled, *Effective, string) {
	t.Helper()
	c, e, w, err := f.load(t, args...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c, e, w
}

func paths(as []Anchor) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Path)
	}
	return out
}

func effValue(e *Effective, key string) (EffectiveValue, bool) {
	for _, v := range e.Values {
		if v.Key == key {
			return v, true
		}
	}
	return EffectiveValue{}, false
}

func TestDefaults(t *testing.T) {
	f := newFixture(t)
	c, e, warn := f.mustLoad(t)
	if warn != "" {
		t.Errorf("unexpected warning %q", warn)
	}
	if c.Mode != ModeWorkspaceWrite || c.Approval != ApprovalUntrusted || !c.FilesystemRules {
		t.Errorf("mode %s approval %s fs %t", c.Mode, c.Approval, c.FilesystemRules)
	}
	if c.SchemaVersion != CompiledSchemaVersion {
		t.Errorf("schema version %d", c.SchemaVersion)
	}
	if got := paths(c.WritableRoots); len(got) < 1 || got[0] != f.ws {
		t.Errorf("writable roots %v, want workspace first", got)
	}
	if !slices.Contains(paths(c.WritableRoots), "/tmp") {
		t.Errorf("writable roots %v lack /tmp", paths(c.WritableRoots))
	}
	if c.Workspace.Ino == 0 || !c.Workspace.Dir || !c.Workspace.Exists {
		t.Errorf("workspace anchor %+v lacks identity", c.Workspace)
	}
	if c.Network.Policy != NetNone || c.Network.Loopback != LoopbackSession || len(c.Network.Allow) != 0 {
		t.Errorf("network %+v", c.Network)
	}
	if c.ReadAccess != ReadAccessFull || c.ReadableRoots != nil {
		t.Errorf("read access %s %v", c.ReadAccess, c.ReadableRoots)
	}
	ssh := filepath.Join(f.home, ".ssh")
	i := slices.IndexFunc(c.DenyRead, func(a Anchor) bool { return a.Path == ssh })
	if i < 0 || c.DenyRead[i].Exists {
		t.Errorf("deny read %v: want %s with Exists=false", paths(c.DenyRead), ssh)
	}
	if len(c.DenyReadGlobs) != 1 || c.DenyReadGlobs[0].Within != f.ws || c.DenyReadGlobs[0].Include != ".env*" || !slices.Equal(c.DenyReadGlobs[0].Exclude, []string{".env.example"}) {
		t.Errorf("deny read globs %+v", c.DenyReadGlobs)
	}
	if c.Permissions.Default != ActionAsk || len(c.Permissions.Rules) != 0 {
		t.Errorf("permissions %+v", c.Permissions)
	}
	if c.Audit.Path != DefaultAuditPath {
		t.Errorf("audit %q", c.Audit.Path)
	}
	if !slices.Contains(c.Env.Scrub, "*_TOKEN") || !slices.Contains(c.Env.Scrub, "SSH_AUTH_SOCK") || !slices.Contains(c.Env.Scrub, "AWS_*") {
		t.Errorf("scrub %v", c.Env.Scrub)
	}
	if !c.AllowUnsandboxedCommands || !c.ProtectedPathsComplete {
		t.Errorf("flags %+v", c)
	}
	if !slices.Equal(c.AllowedModes, []Mode{ModeReadOnly, ModeWorkspaceWrite, ModeExternalSandbox, ModeFullAccess}) {
		t.Errorf("allowed modes %v", c.AllowedModes)
	}
	wantNames := append([]string{".git"}, defaultProtectedNames...)
	for _, n := range wantNames {
		if !slices.ContainsFunc(c.ProtectedPatterns, func(p ProtectedPattern) bool { return len(p.Components) == 1 && p.Components[0] == n }) {
			t.Errorf("protected patterns lack %s", n)
		}
	}
	for _, want := range [][]string{{".git", "hooks"}, {".git", "config"}, {".git", "modules", "*", "hooks"}, {".git", "worktrees", "*", "config.worktree"}} {
		if !slices.ContainsFunc(c.ProtectedPatterns, func(p ProtectedPattern) bool { return slices.Equal(p.Components, want) }) {
			t.Errorf("protected patterns lack %v", want)
		}
	}
	v, ok := effValue(e, "sandbox.mode")
	if !ok || v.Value != "workspace-write" || v.Source != "default" {
		t.Errorf("effective sandbox.mode %+v", v)
	}
	if len(e.Files) != 0 {
		t.Errorf("files %v", e.Files)
	}
}

// TestKeys sets every key in the user layer and checks what it compiles to.
func TestKeys(t *testing.T) {
	tests := []struct {
		name  string
		toml  string
		setup func(t *testing.T, f *fixture)
		check func(t *testing.T, f *fixture, c *Compiled)
	}{
		{"mode read-only", "[sandbox]\nmode = \"read-only\"\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.Mode != ModeReadOnly || len(c.WritableRoots) != 0 || !c.FilesystemRules {
				t.Errorf("got %s %v %t", c.Mode, paths(c.WritableRoots), c.FilesystemRules)
			}
		}},
		{"mode external-sandbox", "[sandbox]\nmode = \"external-sandbox\"\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.FilesystemRules || c.Network.Policy != NetNone || len(c.DenyRead) == 0 {
				t.Errorf("got fs %t net %s deny %d", c.FilesystemRules, c.Network.Policy, len(c.DenyRead))
			}
		}},
		{"mode full-access", "[sandbox]\nmode = \"full-access\"\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.FilesystemRules || c.Network.Policy != NetFull || len(c.DenyRead) != 0 || len(c.DenyReadGlobs) != 0 {
				t.Errorf("got fs %t net %s deny %v", c.FilesystemRules, c.Network.Policy, c.DenyRead)
			}
		}},
		{"approval", "[sandbox]\napproval = \"on-failure\"\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.Approval != ApprovalOnFailure {
				t.Errorf("approval %s", c.Approval)
			}
		}},
		{"allowed_modes", "[sandbox]\nallowed_modes = [\"read-only\", \"workspace-write\"]\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if !slices.Equal(c.AllowedModes, []Mode{ModeReadOnly, ModeWorkspaceWrite}) {
				t.Errorf("allowed %v", c.AllowedModes)
			}
		}},
		{"writable_roots", "[sandbox]\nwritable_roots = [\"~/scratch\", \"rel\"]\n", func(t *testing.T, f *fixture) {
			f.mkdir(t, "home/scratch")
			f.mkdir(t, "ws/rel")
		}, func(t *testing.T, f *fixture, c *Compiled) {
			got := paths(c.WritableRoots)
			if !slices.Contains(got, filepath.Join(f.home, "scratch")) || !slices.Contains(got, filepath.Join(f.ws, "rel")) {
				t.Errorf("roots %v", got)
			}
			i := slices.Index(got, filepath.Join(f.home, "scratch"))
			if !strings.HasSuffix(c.WritableRoots[i].Source, "config.toml:2:19") {
				t.Errorf("source %q", c.WritableRoots[i].Source)
			}
		}},
		{"exclude_slash_tmp", "[sandbox]\nexclude_slash_tmp = true\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if slices.Contains(paths(c.WritableRoots), "/tmp") {
				t.Errorf("roots %v", paths(c.WritableRoots))
			}
		}},
		{"TMPDIR kept", "", func(t *testing.T, f *fixture) {
			f.env["TMPDIR"] = f.mkdir(t, "tmpdir")
		}, func(t *testing.T, f *fixture, c *Compiled) {
			if !slices.Contains(paths(c.WritableRoots), filepath.Join(f.root, "tmpdir")) {
				t.Errorf("roots %v", paths(c.WritableRoots))
			}
		}},
		{"exclude_tmpdir_env_var", "[sandbox]\nexclude_tmpdir_env_var = true\n", func(t *testing.T, f *fixture) {
			f.env["TMPDIR"] = f.mkdir(t, "tmpdir")
		}, func(t *testing.T, f *fixture, c *Compiled) {
			if slices.Contains(paths(c.WritableRoots), filepath.Join(f.root, "tmpdir")) {
				t.Errorf("roots %v", paths(c.WritableRoots))
			}
		}},
		{"read_only_access restricted", "[sandbox]\nread_only_access = \"restricted\"\nreadable_roots = [\"~/docs\"]\n", func(t *testing.T, f *fixture) {
			f.mkdir(t, "home/docs")
		}, func(t *testing.T, f *fixture, c *Compiled) {
			got := paths(c.ReadableRoots)
			if c.ReadAccess != ReadAccessRestricted || !slices.Contains(got, filepath.Join(f.home, "docs")) || !slices.Contains(got, "/usr") {
				t.Errorf("read %s %v", c.ReadAccess, got)
			}
		}},
		{"protected_subpaths", "[sandbox]\nprotected_subpaths = [\"deploy/keys\", \"~/abs\"]\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if !slices.ContainsFunc(c.ProtectedPatterns, func(p ProtectedPattern) bool { return slices.Equal(p.Components, []string{"deploy", "keys"}) }) {
				t.Errorf("patterns lack deploy/keys")
			}
			if !slices.Contains(paths(c.ProtectedPaths), filepath.Join(f.home, "abs")) {
				t.Errorf("paths %v", paths(c.ProtectedPaths))
			}
		}},
		{"protect_git all", "[sandbox]\nprotect_git = \"all\"\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if !slices.ContainsFunc(c.ProtectedPatterns, func(p ProtectedPattern) bool {
				return slices.Equal(p.Components, []string{".git"}) && p.Type == EntryAny
			}) {
				t.Errorf("no whole-.git pattern")
			}
			if slices.ContainsFunc(c.ProtectedPatterns, func(p ProtectedPattern) bool { return len(p.Components) > 1 && p.Components[0] == ".git" }) {
				t.Errorf("sub-.git patterns are redundant under all")
			}
		}},
		{"deny_read", "[sandbox]\ndeny_read = [\"~/secret\", \"/opt/x\"]\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			got := paths(c.DenyRead)
			if !slices.Contains(got, filepath.Join(f.home, "secret")) || !slices.Contains(got, "/opt/x") {
				t.Errorf("deny %v", got)
			}
		}},
		{"excluded_commands", "[sandbox]\nexcluded_commands = [\"docker\", \"watchman\"]\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if !slices.Equal(c.ExcludedCommands, []string{"docker", "watchman"}) {
				t.Errorf("excluded %v", c.ExcludedCommands)
			}
		}},
		{"allow_unsandboxed_commands false drops exclusions", "[sandbox]\nexcluded_commands = [\"docker\"]\nallow_unsandboxed_commands = false\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.AllowUnsandboxedCommands || len(c.ExcludedCommands) != 0 {
				t.Errorf("got %t %v", c.AllowUnsandboxedCommands, c.ExcludedCommands)
			}
		}},
		{"sandbox.network true", "[sandbox]\nnetwork = true\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.Network.Policy != NetFull {
				t.Errorf("net %s", c.Network.Policy)
			}
		}},
		{"sandbox.network false", "[sandbox]\nnetwork = false\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.Network.Policy != NetNone {
				t.Errorf("net %s", c.Network.Policy)
			}
		}},
		{"network allowlist", "[network]\npolicy = \"allowlist\"\nallow = [\"github.com\", \"*.npmjs.org\", \"10.0.0.0/8:443\"]\nloopback = \"all\"\nallow_unix_sockets = [\"/run/docker.sock\"]\nmin_ttl_seconds = 5\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			n := c.Network
			if n.Policy != NetAllowlist || len(n.Allow) != 3 || n.Allow[0].Host != "github.com" || n.Allow[1].Host != "*.npmjs.org" || n.Allow[2].Prefix.String() != "10.0.0.0/8" || n.Allow[2].Ports[0] != (PortRange{443, 443}) {
				t.Errorf("net %+v", n)
			}
			if n.Loopback != LoopbackAll || !slices.Equal(n.AllowUnixSockets, []string{"/run/docker.sock"}) || n.MinTTLSeconds != 5 {
				t.Errorf("net %+v", n)
			}
			if !strings.HasSuffix(n.Allow[1].Source, ":3:24") {
				t.Errorf("source %q", n.Allow[1].Source)
			}
		}},
		{"env", "[env]\npassthrough = [\"GH_TOKEN\"]\nscrub = [\"MY_*\"]\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if !slices.Equal(c.Env.Passthrough, []string{"GH_TOKEN"}) || !slices.Contains(c.Env.Scrub, "MY_*") || !slices.Contains(c.Env.Scrub, "*_TOKEN") {
				t.Errorf("env %+v", c.Env)
			}
		}},
		{"limits", "[limits]\npids_max = 512\nmemory_max = \"2G\"\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.Limits != (Limits{PidsMax: 512, MemoryMax: 2 << 30}) {
				t.Errorf("limits %+v", c.Limits)
			}
		}},
		{"limits integer memory", "[limits]\nmemory_max = 1048576\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.Limits.MemoryMax != 1<<20 {
				t.Errorf("limits %+v", c.Limits)
			}
		}},
		{"audit", "[audit]\npath = \"~/audit.jsonl\"\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.Audit.Path != filepath.Join(f.home, "audit.jsonl") {
				t.Errorf("audit %q", c.Audit.Path)
			}
			if c.Audit.KernelBuffer != DefaultKernelBuffer {
				t.Errorf("default kernel buffer %d, want %d", c.Audit.KernelBuffer, DefaultKernelBuffer)
			}
		}},
		{"audit kernel buffer", "[audit]\nkernel_buffer = \"16M\"\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			if c.Audit.KernelBuffer != 16<<20 {
				t.Errorf("kernel buffer %d, want 16M", c.Audit.KernelBuffer)
			}
		}},
		{"permissions", "[permissions]\ndefault = \"deny\"\n[[permissions.rules]]\ntool = \"bash\"\npattern = \"git *\"\naction = \"allow\"\n[[permissions.rules]]\ntool = \"read\"\naction = \"allow\"\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			p := c.Permissions
			if p.Default != ActionDeny || len(p.Rules) != 2 || p.Rules[0].Pattern != "git *" || p.Rules[1].Pattern != "*" {
				t.Errorf("perm %+v", p)
			}
			if !strings.HasSuffix(p.Rules[1].Source, "config.toml:7:15") {
				t.Errorf("source %q", p.Rules[1].Source)
			}
		}},
		{"agent", "[agent.build.permission]\ndefault = \"allow\"\n[[agent.build.permission.rules]]\ntool = \"bash\"\npattern = \"rm *\"\naction = \"deny\"\n", nil, func(t *testing.T, f *fixture, c *Compiled) {
			p := c.Permissions
			if p.AgentDefaults["build"] != ActionAllow || len(p.Agents["build"]) != 1 || p.Agents["build"][0].Action != ActionDeny {
				t.Errorf("perm %+v", p)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.setup != nil {
				tt.setup(t, f)
			}
			f.write(t, "home/.openoxide/config.toml", tt.toml)
			c, _, _ := f.mustLoad(t)
			tt.check(t, f, c)
		})
	}
}

func TestLayers(t *testing.T) {
	f := newFixture(t)
	f.write(t, "etc/policy.toml", "[sandbox]\nmode = \"read-only\"\napproval = \"untrusted\"\n[limits]\npids_max = 100\n")
	f.write(t, "etc/policy.d/20-b.toml", "[limits]\npids_max = 300\n")
	f.write(t, "etc/policy.d/10-a.toml", "[limits]\npids_max = 200\nmemory_max = \"1G\"\n")
	f.write(t, "home/.openoxide/config.toml", "[sandbox]\nmode = \"workspace-write\"\n[network]\nloopback = \"none\"\n[[permissions.rules]]\ntool = \"bash\"\npattern = \"ls *\"\naction = \"allow\"\n")
	f.write(t, "ws/.openoxide/config.toml", "[network]\nloopback = \"all\"\n[[permissions.rules]]\ntool = \"bash\"\npattern = \"rm *\"\naction = \"deny\"\n")
	extra := f.write(t, "extra.toml", "[sandbox]\napproval = \"on-failure\"\n")
	f.write(t, "ws/.git/HEAD", "ref: refs/heads/main\n")
	c, e, _ := f.mustLoad(t, "--config", extra, "--audit-log", filepath.Join(f.root, "a.jsonl"))
	wantFiles := []string{
		filepath.Join(f.managed, "policy.toml"),
		filepath.Join(f.managed, "policy.d", "10-a.toml"),
		filepath.Join(f.managed, "policy.d", "20-b.toml"),
		filepath.Join(f.home, ".openoxide", "config.toml"),
		filepath.Join(f.ws, ".openoxide", "config.toml"),
		extra,
	}
	if !slices.Equal(e.Files, wantFiles) {
		t.Errorf("files\n got %v\nwant %v", e.Files, wantFiles)
	}
	if c.Limits.PidsMax != 300 || c.Limits.MemoryMax != 1<<30 {
		t.Errorf("policy.d order: limits %+v", c.Limits)
	}
	if c.Mode != ModeWorkspaceWrite || c.Approval != ApprovalOnFailure || c.Network.Loopback != LoopbackAll {
		t.Errorf("precedence: %s %s %s", c.Mode, c.Approval, c.Network.Loopback)
	}
	if len(c.Permissions.Rules) != 2 || c.Permissions.Rules[0].Pattern != "ls *" || c.Permissions.Rules[1].Pattern != "rm *" {
		t.Errorf("rules accumulate in layer order: %+v", c.Permissions.Rules)
	}
	if c.Audit.Path != filepath.Join(f.root, "a.jsonl") {
		t.Errorf("audit %q", c.Audit.Path)
	}
	for key, src := range map[string]string{
		"sandbox.mode":      filepath.Join(f.home, ".openoxide", "config.toml") + ":2:8",
		"sandbox.approval":  extra + ":2:12",
		"limits.pids_max":   filepath.Join(f.managed, "policy.d", "20-b.toml") + ":2:12",
		"limits.memory_max": filepath.Join(f.managed, "policy.d", "10-a.toml") + ":3:14",
		"network.loopback":  filepath.Join(f.ws, ".openoxide", "config.toml") + ":2:12",
		"audit.path":        "flag --audit-log",
		"workspace":         "option",
	} {
		v, ok := effValue(e, key)
		if !ok || v.Source != src {
			t.Errorf("%s source %q, want %q", key, v.Source, src)
		}
	}

	// Flags beat every file and add to lists.
	f.mkdir(t, "extra-root")
	c, e, _ = f.mustLoad(t, "-s", "read-only", "--net", "allowlist", "--allow-net", "example.com:443", "--writable-root", filepath.Join(f.root, "extra-root"))
	if c.Mode != ModeReadOnly || c.Network.Policy != NetAllowlist || len(c.Network.Allow) != 1 || c.Network.Allow[0].Source != "flag --allow-net" {
		t.Errorf("flags: %s %+v", c.Mode, c.Network)
	}
	if v, _ := effValue(e, "sandbox.mode"); v.Source != "flag --sandbox" {
		t.Errorf("source %q", v.Source)
	}
	c, _, _ = f.mustLoad(t, "--writable-root", filepath.Join(f.root, "extra-root"), "--allow-net", "10.1.2.3")
	if !slices.Contains(paths(c.WritableRoots), filepath.Join(f.root, "extra-root")) || c.Network.Policy != NetAllowlist {
		t.Errorf("--writable-root/--allow-net: %v %s", paths(c.WritableRoots), c.Network.Policy)
	}
}

func TestPresets(t *testing.T) {
	f := newFixture(t)
	c, _, warn := f.mustLoad(t, "--full-auto")
	if c.Mode != ModeWorkspaceWrite || c.Approval != ApprovalOnRequest || warn != "" {
		t.Errorf("--full-auto: %s %s %q", c.Mode, c.Approval, warn)
	}
	c, e, warn := f.mustLoad(t, "--yolo")
	if c.Mode != ModeFullAccess || c.Approval != ApprovalNever || c.Network.Policy != NetFull || c.FilesystemRules {
		t.Errorf("--yolo: %+v", c)
	}
	if !strings.Contains(warn, "WARNING: --yolo") {
		t.Errorf("--yolo warning missing: %q", warn)
	}
	if v, _ := effValue(e, "sandbox.approval"); v.Source != "flag --yolo" {
		t.Errorf("source %q", v.Source)
	}
	for _, args := range [][]string{{"--yolo", "--full-auto"}, {"--yolo", "-s", "read-only"}, {"--full-auto", "-s", "full-access"}, {"-s", "bogus"}, {"--net", "some"}, {"--allow-net", "bad host!"}} {
		if _, _, _, err := f.load(t, args...); err == nil || !strings.HasPrefix(err.Error(), "flag --") {
			t.Errorf("%v: error %v, want one naming the flag", args, err)
		}
	}
}

// TestLocks covers lower layers tightening and loosening locked keys.
func TestLocks(t *testing.T) {
	managed := "[sandbox]\nmode = \"workspace-write\"\nwritable_roots = [\"/srv/a\", \"/srv/b\"]\ndeny_read = [\"/srv/secret\"]\n[network]\npolicy = \"allowlist\"\nallow = [\"github.com\"]\n[limits]\npids_max = 100\n[[permissions.rules]]\ntool = \"bash\"\npattern = \"rm *\"\naction = \"deny\"\n[managed]\nlocked = [\"sandbox\", \"network.policy\", \"network.allow\", \"limits\", \"permissions\", \"audit.path\", \"audit.kernel_buffer\"]\n[audit]\nkernel_buffer = \"16M\"\n"
	tests := []struct {
		name string
		user string
		args []string
		// errAt is the expected "file:line:col" prefix ("" = must load).
		errAt string
	}{
		{"tighten mode", "[sandbox]\nmode = \"read-only\"\n", nil, ""},
		{"loosen mode", "[sandbox]\nmode = \"full-access\"\n", nil, "USER:2:8"},
		{"loosen mode by flag", "", []string{"--yolo"}, "flag --yolo"},
		{"loosen mode by -s", "", []string{"-s", "external-sandbox"}, "flag --sandbox"},
		{"remove writable root", "[sandbox]\nwritable_roots = [\"/srv/a\"]\n", nil, ""},
		{"add writable root", "[sandbox]\nwritable_roots = [\"/srv/a\", \"/home\"]\n", nil, "USER:2:29"},
		{"add writable root by flag", "", []string{"--writable-root", "/var"}, "flag --writable-root"},
		{"add deny_read", "[sandbox]\ndeny_read = [\"/srv/secret\", \"/srv/more\"]\n", nil, ""},
		{"drop deny_read", "[sandbox]\ndeny_read = []\n", nil, "USER:2:1"},
		{"network none", "[network]\npolicy = \"none\"\n", nil, ""},
		{"network full", "[network]\npolicy = \"full\"\n", nil, "USER:2:10"},
		{"network shorthand", "[sandbox]\nnetwork = true\n", nil, "USER:2:11"},
		{"network flag", "", []string{"--net", "full"}, "flag --net"},
		{"allow more hosts", "[network]\nallow = [\"github.com\", \"evil.com\"]\n", nil, "USER:2:24"},
		{"allow-net flag", "", []string{"--allow-net", "evil.com"}, "flag --allow-net"},
		{"unlocked loopback", "[network]\nloopback = \"all\"\n", nil, ""},
		{"lower pids", "[limits]\npids_max = 50\n", nil, ""},
		{"raise pids", "[limits]\npids_max = 500\n", nil, "USER:2:12"},
		{"unlimited pids", "[limits]\npids_max = 0\n", nil, "USER:2:12"},
		{"deny rule", "[[permissions.rules]]\ntool = \"bash\"\npattern = \"curl *\"\naction = \"deny\"\n", nil, ""},
		{"allow rule", "[[permissions.rules]]\ntool = \"bash\"\npattern = \"rm *\"\naction = \"allow\"\n", nil, "USER:1:15"},
		{"agent allow rule", "[[agent.x.permission.rules]]\ntool = \"bash\"\npattern = \"rm *\"\naction = \"allow\"\n", nil, "USER:1:22"},
		{"agent allow rule under rules lock", "[[agent.x.permission.rules]]\ntool = \"read\"\npattern = \"**\"\naction = \"allow\"\n", nil, "USER:1:22"},
		{"looser default", "[permissions]\ndefault = \"allow\"\n", nil, "USER:2:11"},
		{"looser agent default", "[agent.x.permission]\ndefault = \"allow\"\n", nil, "USER:2:11"},
		{"audit path", "[audit]\npath = \"/tmp/mine\"\n", nil, "USER:2:8"},
		{"audit path flag", "", []string{"--audit-log", "/tmp/x"}, "flag --audit-log"},
		{"raise kernel buffer", "[audit]\nkernel_buffer = \"64M\"\n", nil, ""},
		{"lower kernel buffer", "[audit]\nkernel_buffer = \"4M\"\n", nil, "USER:2:17"},
		{"exclude tmp is tightening", "[sandbox]\nexclude_slash_tmp = true\n", nil, ""},
		{"unsandboxed true when locked default", "[sandbox]\nallow_unsandboxed_commands = true\n", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			mp := f.write(t, "etc/policy.toml", managed)
			up := f.write(t, "home/.openoxide/config.toml", tt.user)
			// writable roots must exist to compile; point them into the fixture.
			_, _, _, err := f.load(t, tt.args...)
			if tt.errAt == "" {
				if err != nil && !strings.Contains(err.Error(), "writable root") {
					t.Fatalf("want success, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want a lock error at %s, got success", tt.errAt)
			}
			want := strings.ReplaceAll(tt.errAt, "USER", up)
			msg := err.Error()
			if !strings.HasPrefix(msg, want+": ") {
				t.Errorf("error %q\n does not start with %q", msg, want)
			}
			if !strings.Contains(msg, "locked at "+mp+":15:") {
				t.Errorf("error %q does not name the lock %s:15", msg, mp)
			}
			if !strings.Contains(msg, "hint: ") {
				t.Errorf("error %q has no hint", msg)
			}
		})
	}
}

func TestAllowedModes(t *testing.T) {
	f := newFixture(t)
	mp := f.write(t, "etc/policy.toml", "[sandbox]\nallowed_modes = [\"read-only\", \"workspace-write\"]\n")
	_, _, warn, err := f.load(t, "--yolo")
	if err == nil || !strings.HasPrefix(err.Error(), "flag --yolo: sandbox mode \"full-access\" is not allowed") || !strings.Contains(err.Error(), mp+":2:1") {
		t.Fatalf("--yolo: %v", err)
	}
	if strings.Contains(warn, "WARNING") {
		t.Errorf("a refused --yolo must not warn as if it ran: %q", warn)
	}
	up := f.write(t, "home/.openoxide/config.toml", "[sandbox]\nmode = \"full-access\"\n")
	if _, _, _, err := f.load(t); err == nil || !strings.HasPrefix(err.Error(), up+":2:8: ") {
		t.Fatalf("user full-access: %v", err)
	}
	f.write(t, "home/.openoxide/config.toml", "[sandbox]\nallowed_modes = [\"read-only\", \"full-access\"]\n")
	if _, _, _, err := f.load(t); err == nil || !strings.Contains(err.Error(), "may only narrow") {
		t.Fatalf("widening allowed_modes: %v", err)
	}
	f.write(t, "home/.openoxide/config.toml", "[sandbox]\nallowed_modes = [\"read-only\"]\n")
	if _, _, _, err := f.load(t); err == nil || !strings.Contains(err.Error(), "\"workspace-write\" is not allowed") {
		t.Fatalf("narrowed allowed_modes excluding the default mode: %v", err)
	}
	c, _, _ := f.mustLoad(t, "-s", "read-only")
	if !slices.Equal(c.AllowedModes, []Mode{ModeReadOnly}) {
		t.Errorf("allowed %v", c.AllowedModes)
	}
}

// TestErrors checks each error shape: file:line:col, message, hint.
func TestErrors(t *testing.T) {
	tests := []struct {
		name, file, toml string
		at               string // "line:col"
		msg, hint        string
	}{
		{"syntax", "home", "[sandbox\nmode = 1\n", "1:9", "invalid TOML", "toml.io"},
		{"duplicate key", "home", "[sandbox]\nmode = \"read-only\"\nmode = \"read-only\"\n", "3:1", "invalid TOML", ""},
		{"unknown table", "home", "[sandbx]\nmode = \"read-only\"\n", "1:2", "unknown key sandbx", "did you mean \"sandbox\"?"},
		{"unknown key", "home", "[sandbox]\nmod = \"read-only\"\n", "2:1", "unknown key sandbox.mod", "did you mean \"mode\"?"},
		{"unknown dotted key", "home", "sandbox.modez = \"x\"\n", "1:9", "unknown key sandbox.modez", "did you mean \"mode\"?"},
		{"wrong type", "home", "[sandbox]\nmode = 3\n", "2:8", "sandbox.mode must be a string, not an integer", ""},
		{"wrong list type", "home", "[sandbox]\nwritable_roots = \"/x\"\n", "2:18", "must be an array of strings", ""},
		{"wrong element type", "home", "[sandbox]\nwritable_roots = [\"/x\", 3]\n", "2:25", "sandbox.writable_roots[1] must be a string", ""},
		{"bad enum", "home", "[sandbox]\nmode = \"yolo\"\n", "2:8", "bad value for sandbox.mode: \"yolo\"", "one of: read-only"},
		{"bad net entry", "home", "[network]\nallow = [\"ok.com\", \"10.0.0.0/33\"]\n", "2:20", "bad value for network.allow", "entries look like"},
		{"bad wildcard", "home", "[network]\nallow = [\"a.*.com\"]\n", "2:10", "wildcards are only allowed", ""},
		{"bad port", "home", "[network]\nallow = [\"x.com:0\"]\n", "2:10", "bad port", ""},
		{"bad size", "home", "[limits]\nmemory_max = \"lots\"\n", "2:14", "is not a size", ""},
		{"negative", "home", "[limits]\npids_max = -1\n", "2:12", "is negative", "0 for unlimited"},
		{"kernel buffer not a power of two", "home", "[audit]\nkernel_buffer = \"3M\"\n", "2:17", "bad value for audit.kernel_buffer: 3145728 bytes is not a power of two", "e.g. \"16M\""},
		{"kernel buffer too small", "home", "[audit]\nkernel_buffer = 4096\n", "2:17", "from 64K to 1G", ""},
		{"not a table", "home", "sandbox = 1\n", "1:11", "sandbox must be a table", ""},
		{"network shorthand type", "home", "[sandbox]\nnetwork = \"yes\"\n", "2:11", "must be a boolean", ""},
		{"network twice", "home", "[sandbox]\nnetwork = true\n[network]\npolicy = \"none\"\n", "2:1", "sandbox.network and network.policy are both set", "keep one"},
		{"rule without action", "home", "[[permissions.rules]]\ntool = \"bash\"\n", "1:15", "needs both tool and action", ""},
		{"rule bad action", "home", "[[permissions.rules]]\ntool = \"bash\"\naction = \"maybe\"\n", "3:10", "bad value for permissions.rules[0].action", "allow, deny, ask"},
		{"rule unknown key", "home", "[[permissions.rules]]\ntool = \"bash\"\naction = \"deny\"\npatern = \"x\"\n", "4:1", "unknown key permissions.rules[0].patern", "did you mean \"pattern\"?"},
		{"rule bad glob", "home", "[[permissions.rules]]\ntool = \"read\"\npattern = \"[x\"\naction = \"deny\"\n", "3:11", "not a valid glob", ""},
		{"agent unknown", "home", "[agent.x.perms]\ndefault = \"ask\"\n", "1:10", "unknown key agent.x.perms", "permission"},
		{"locks outside managed", "home", "[managed]\nlocked = [\"sandbox\"]\n", "2:1", "only honoured in managed policy", "policy.d"},
		{"unknown lock", "etc", "[managed]\nlocked = [\"sandbox.nope\"]\n", "2:11", "bad value for managed.locked", "one of:"},
		{"tilde user", "home", "[sandbox]\nwritable_roots = [\"~bob/x\"]\n", "2:19", "only ~ and ~/... are expanded", ""},
		{"dotdot protected", "home", "[sandbox]\nprotected_subpaths = [\"../x\"]\n", "2:23", "\"..\" is not allowed", ""},
		{"bad env glob", "home", "[env]\npassthrough = [\"A-B\"]\n", "2:16", "environment names", ""},
		{"empty excluded command", "home", "[sandbox]\nexcluded_commands = [\" \"]\n", "2:22", "must not be empty", ""},
		{"workspace config", "ws", "[sandbox]\nmode = \"nope\"\n", "2:8", "bad value for sandbox.mode", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			rel := map[string]string{"home": "home/.openoxide/config.toml", "etc": "etc/policy.toml", "ws": "ws/.openoxide/config.toml"}[tt.file]
			p := f.write(t, rel, tt.toml)
			_, _, _, err := f.load(t)
			if err == nil {
				t.Fatal("want an error")
			}
			msg := err.Error()
			if want := p + ":" + tt.at + ": "; !strings.HasPrefix(msg, want) {
				t.Errorf("error %q\n does not start with %q", msg, want)
			}
			if !strings.Contains(msg, tt.msg) {
				t.Errorf("error %q lacks %q", msg, tt.msg)
			}
			if tt.hint != "" && !strings.Contains(msg, "hint: ") || !strings.Contains(msg, tt.hint) {
				t.Errorf("error %q lacks hint %q", msg, tt.hint)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	t.Run("workspace missing", func(t *testing.T) {
		f := newFixture(t)
		_, _, _, err := f.load(t, "--workspace", filepath.Join(f.root, "nope"))
		if err == nil || !strings.HasPrefix(err.Error(), "flag --workspace: workspace ") || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("workspace is a file", func(t *testing.T) {
		f := newFixture(t)
		p := f.write(t, "file", "x")
		if _, _, _, err := f.load(t, "--workspace", p); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("writable root missing", func(t *testing.T) {
		f := newFixture(t)
		up := f.write(t, "home/.openoxide/config.toml", "[sandbox]\nwritable_roots = [\"/nonexistent/x\"]\n")
		if _, _, _, err := f.load(t); err == nil || !strings.HasPrefix(err.Error(), up+":2:19: writable root") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("config flag missing", func(t *testing.T) {
		f := newFixture(t)
		if _, _, _, err := f.load(t, "--config", filepath.Join(f.root, "nope.toml")); err == nil || !strings.HasPrefix(err.Error(), "flag --config: ") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("protected symlink outside root", func(t *testing.T) {
		f := newFixture(t)
		outside := f.mkdir(t, "elsewhere/.claude")
		if err := os.Symlink(outside, filepath.Join(f.ws, ".claude")); err != nil {
			t.Fatal(err)
		}
		_, _, _, err := f.load(t)
		if err == nil || !strings.Contains(err.Error(), "outside the writable root") || !strings.HasPrefix(err.Error(), filepath.Join(f.ws, ".claude")+": ") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("protected dangling symlink", func(t *testing.T) {
		f := newFixture(t)
		if err := os.Symlink(filepath.Join(f.root, "gone"), filepath.Join(f.ws, "AGENTS.md")); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := f.load(t); err == nil || !strings.Contains(err.Error(), "dangling symlink") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("git hooks symlink", func(t *testing.T) {
		f := newFixture(t)
		f.mkdir(t, "wt")
		f.mkdir(t, "gitdirs/wt")
		if err := os.Symlink("/usr/share", filepath.Join(f.root, "gitdirs/wt/hooks")); err != nil {
			t.Fatal(err)
		}
		f.write(t, "ws/.git", "gitdir: ../gitdirs/wt\n")
		if _, _, _, err := f.load(t); err == nil || !strings.Contains(err.Error(), "git control entry is a symlink") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestProtectedScan(t *testing.T) {
	f := newFixture(t)
	f.mkdir(t, "ws/.git/hooks")
	f.write(t, "ws/.git/config", "[core]\n")
	f.mkdir(t, "ws/.git/objects/ab")
	f.mkdir(t, "ws/.git/modules/lib/hooks")
	f.mkdir(t, "ws/sub/nested/.git/info")
	f.write(t, "ws/sub/nested/.git/config", "")
	f.write(t, "ws/pkg/CLAUDE.md", "x")
	f.mkdir(t, "ws/pkg/.vscode")
	f.write(t, "ws/pkg/.vscode/settings.json", "{}")
	f.write(t, "ws/src/hooks/useThing.js", "")
	// A linked worktree: .git file pointing into the main repo's worktrees/.
	f.mkdir(t, "main/.git/worktrees/wt/hooks")
	f.write(t, "main/.git/worktrees/wt/commondir", "../..\n")
	f.write(t, "main/.git/config", "")
	f.mkdir(t, "main/.git/hooks")
	f.write(t, "ws/wt/.git", "gitdir: "+filepath.Join(f.root, "main/.git/worktrees/wt")+"\n")
	// A symlinked protected name inside the root is recorded, target too.
	f.mkdir(t, "ws/real-codex")
	if err := os.Symlink("real-codex", filepath.Join(f.ws, ".codex")); err != nil {
		t.Fatal(err)
	}
	c, _, _ := f.mustLoad(t)
	got := paths(c.ProtectedPaths)
	for _, want := range []string{
		"ws/.git/hooks", "ws/.git/config", "ws/.git/modules/lib/hooks", "ws/sub/nested/.git/info", "ws/sub/nested/.git/config",
		"ws/pkg/CLAUDE.md", "ws/pkg/.vscode", "ws/wt/.git",
		"main/.git/worktrees/wt/hooks", "main/.git/worktrees/wt/commondir", "main/.git/config", "main/.git/hooks",
		"ws/.codex", "ws/real-codex",
	} {
		if !slices.Contains(got, filepath.Join(f.root, want)) {
			t.Errorf("protected paths lack %s", want)
		}
	}
	for _, unwanted := range []string{"ws/.git", "ws/.git/objects", "ws/pkg/.vscode/settings.json", "ws/src/hooks"} {
		if slices.Contains(got, filepath.Join(f.root, unwanted)) {
			t.Errorf("protected paths contain %s", unwanted)
		}
	}
	link := c.ProtectedPaths[slices.Index(got, filepath.Join(f.ws, ".codex"))]
	var st os.FileInfo
	st, _ = os.Lstat(filepath.Join(f.ws, ".codex"))
	if dev, ino := fileID(st); link.Ino != ino || link.Dev != dev {
		t.Errorf("symlink anchor %+v must be the link itself (ino %d)", link, ino)
	}

	// protect_git = "all" protects the whole git directory, worktree gitdir included.
	f.write(t, "home/.openoxide/config.toml", "[sandbox]\nprotect_git = \"all\"\n")
	c, _, _ = f.mustLoad(t)
	got = paths(c.ProtectedPaths)
	for _, want := range []string{"ws/.git", "ws/sub/nested/.git", "main/.git/worktrees/wt"} {
		if !slices.Contains(got, filepath.Join(f.root, want)) {
			t.Errorf("protect_git=all: paths lack %s (%v)", want, got)
		}
	}
}

func TestDenyReadExisting(t *testing.T) {
	f := newFixture(t)
	f.mkdir(t, "home/.ssh")
	f.mkdir(t, "vault/aws")
	if err := os.Symlink(filepath.Join(f.root, "vault/aws"), filepath.Join(f.home, ".aws")); err != nil {
		t.Fatal(err)
	}
	c, _, _ := f.mustLoad(t)
	byPath := map[string]Anchor{}
	for _, a := range c.DenyRead {
		byPath[a.Path] = a
	}
	ssh := byPath[filepath.Join(f.home, ".ssh")]
	if !ssh.Exists || ssh.Ino == 0 || !ssh.Dir {
		t.Errorf("~/.ssh anchor %+v", ssh)
	}
	if a := byPath[filepath.Join(f.root, "vault/aws")]; !a.Exists || a.Ino == 0 {
		t.Errorf("resolved ~/.aws target missing: %v", paths(c.DenyRead))
	}
	if _, ok := byPath[filepath.Join(f.home, ".aws")]; !ok {
		t.Errorf("symlink ~/.aws itself missing: %v", paths(c.DenyRead))
	}
	if a := byPath[filepath.Join(f.home, ".kube")]; a.Exists || a.Path == "" {
		t.Errorf("missing ~/.kube must stay with Exists=false: %+v", a)
	}
}

func TestDeterministicJSON(t *testing.T) {
	f := newFixture(t)
	f.write(t, "home/.openoxide/config.toml", "[network]\npolicy = \"allowlist\"\nallow = [\"b.com\", \"10.0.0.0/8:443\", \"[2001:db8::1]:22\"]\n[agent.a.permission]\ndefault = \"deny\"\n[agent.b.permission]\ndefault = \"allow\"\n")
	f.mkdir(t, "ws/.git/hooks")
	c1, _, _ := f.mustLoad(t)
	c2, _, _ := f.mustLoad(t)
	d1, err := c1.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := c2.Digest()
	if d1 != d2 || !strings.HasPrefix(d1, "sha256:") {
		t.Errorf("digests differ: %s %s", d1, d2)
	}
	b, err := json.Marshal(c1)
	if err != nil {
		t.Fatal(err)
	}
	var back Compiled
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(&back)
	if string(b2) != string(b) {
		t.Errorf("JSON round trip changed the policy\n got %s\nwant %s", b2, b)
	}
	if !reflect.DeepEqual(back.Network.Allow[1].Prefix, c1.Network.Allow[1].Prefix) || back.Network.Allow[0].Host != "b.com" {
		t.Errorf("network entries lost in round trip: %+v", back.Network.Allow)
	}
	d3, _ := back.Digest()
	if d3 != d1 {
		t.Errorf("digest after round trip %s != %s", d3, d1)
	}
}

func TestWorkspaceLooseningWarns(t *testing.T) {
	f := newFixture(t)
	wp := f.write(t, "ws/.openoxide/config.toml", "[sandbox]\nmode = \"read-only\"\n[network]\npolicy = \"full\"\n[[permissions.rules]]\ntool = \"bash\"\npattern = \"*\"\naction = \"allow\"\n")
	_, _, warn := f.mustLoad(t)
	if !strings.Contains(warn, wp+":4:10: the workspace config loosens network.policy from \"none\" (default) to \"full\"") {
		t.Errorf("no loosening warning for network.policy: %q", warn)
	}
	if !strings.Contains(warn, wp+":5:15: the workspace config adds an allow rule") {
		t.Errorf("no warning for the allow rule: %q", warn)
	}
	if strings.Contains(warn, "sandbox.mode") {
		t.Errorf("tightening the mode must not warn: %q", warn)
	}
	// The same settings in the user's own config are the user's choice.
	f2 := newFixture(t)
	f2.write(t, "home/.openoxide/config.toml", "[network]\npolicy = \"full\"\n")
	if _, _, warn := f2.mustLoad(t); warn != "" {
		t.Errorf("user config warned: %q", warn)
	}
}

func TestRulesLockCoversAgentOverrides(t *testing.T) {
	f := newFixture(t)
	mp := f.write(t, "etc/policy.toml", "[[permissions.rules]]\ntool = \"bash\"\npattern = \"rm *\"\naction = \"deny\"\n[managed]\nlocked = [\"permissions.rules\"]\n")
	up := f.write(t, "home/.openoxide/config.toml", "[[agent.build.permission.rules]]\ntool = \"bash\"\npattern = \"rm *\"\naction = \"allow\"\n")
	_, _, _, err := f.load(t)
	if err == nil || !strings.HasPrefix(err.Error(), up+":1:26: ") || !strings.Contains(err.Error(), "locked at "+mp+":6:11") {
		t.Fatalf("agent override of a locked rule: %v", err)
	}
	f.write(t, "home/.openoxide/config.toml", "[[agent.build.permission.rules]]\ntool = \"bash\"\npattern = \"curl *\"\naction = \"deny\"\n")
	c, _, _ := f.mustLoad(t)
	if d := c.Permissions.Check("bash", "rm -rf x", "build"); d.Action != ActionDeny {
		t.Errorf("managed deny lost for agent build: %+v", d)
	}
}

func TestHandBuiltFlags(t *testing.T) {
	f := newFixture(t)
	f.mkdir(t, "extra")
	var warn bytes.Buffer
	c, e, err := Load(LoadOptions{
		ManagedDir: f.managed, Home: f.home, Workspace: f.root, Warn: &warn,
		Env: func(string) string { return "" },
		Flags: &Flags{Sandbox: "workspace-write", Workspace: f.ws, WritableRoots: []string{filepath.Join(f.root, "extra")},
			Net: "allowlist", AllowNet: []string{"example.org"}, AuditLog: filepath.Join(f.root, "a.log")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Workspace.Path != f.ws || !slices.Contains(paths(c.WritableRoots), filepath.Join(f.root, "extra")) ||
		c.Network.Policy != NetAllowlist || c.Network.Allow[0].Host != "example.org" || c.Audit.Path != filepath.Join(f.root, "a.log") {
		t.Errorf("hand-built flags ignored: %+v", c)
	}
	if v, _ := effValue(e, "workspace"); v.Source != "flag --workspace" {
		t.Errorf("workspace source %q", v.Source)
	}
	if _, _, err := Load(LoadOptions{ManagedDir: f.managed, Home: f.home, Workspace: f.ws, Flags: &Flags{Yolo: true, FullAuto: true}}); err == nil {
		t.Error("--yolo with --full-auto accepted")
	}
}

func TestExplicitProtectedPaths(t *testing.T) {
	f := newFixture(t)
	f.mkdir(t, "ws/real")
	if err := os.Symlink("real", filepath.Join(f.ws, "link")); err != nil {
		t.Fatal(err)
	}
	f.write(t, "home/.openoxide/config.toml", "[sandbox]\nprotected_subpaths = [\""+filepath.Join(f.ws, "link")+"\", \""+filepath.Join(f.ws, "later")+"\", \""+filepath.Join(f.ws, "real")+"\"]\n")
	c, _, _ := f.mustLoad(t)
	got := paths(c.ProtectedPaths)
	for _, want := range []string{"link", "real", "later"} {
		if !slices.Contains(got, filepath.Join(f.ws, want)) {
			t.Errorf("protected paths %v lack %s", got, want)
		}
	}
	i := slices.Index(got, filepath.Join(f.ws, "later"))
	if c.ProtectedPaths[i].Exists {
		t.Errorf("not-yet-existing protected path marked existing")
	}
}

func TestScanBound(t *testing.T) {
	f := newFixture(t)
	for i := range 20 {
		f.write(t, filepath.Join("ws", "d", strings.Repeat("x", i+1)), "")
	}
	f.mkdir(t, "ws/zz/.git/hooks")
	var warn bytes.Buffer
	c := &Compiled{ProtectedPatterns: defaultProtectedPatterns("escalation"), ProtectedPathsComplete: true}
	sc := scanner{c: c, warn: &warn, limit: 5}
	if err := sc.scan(f.ws); err != nil {
		t.Fatal(err)
	}
	if c.ProtectedPathsComplete || !strings.Contains(warn.String(), "stopped scanning") {
		t.Errorf("bound not reported: complete=%t warn=%q", c.ProtectedPathsComplete, warn.String())
	}
	sc = scanner{c: c, warn: &warn, limit: maxScanEntries}
	c.ProtectedPathsComplete = true
	if err := sc.scan(f.ws); err != nil {
		t.Fatal(err)
	}
	if !c.ProtectedPathsComplete || !slices.Contains(paths(c.ProtectedPaths), filepath.Join(f.ws, "zz/.git/hooks")) {
		t.Errorf("full scan: complete=%t paths=%v", c.ProtectedPathsComplete, paths(c.ProtectedPaths))
	}
}
