package policy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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
	wantNames := []string{".git"}
	for _, n := range defaultProtectedNames {
		wantNames = append(wantNames, n.path)
	}
	for _, n := range wantNames {
		if !slices.ContainsFunc(c.ProtectedPatterns, func(p ProtectedPattern) bool { return strings.Join(p.Components, "/") == n && p.Reason != "" }) {
			t.Errorf("protected patterns lack %s (with a reason)", n)
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
