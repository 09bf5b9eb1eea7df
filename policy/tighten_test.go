package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// tightenParent is a parent policy with a value on every dimension, so
// that each row below can move one dimension up or down.
func tightenParent() *Compiled {
	return &Compiled{
		SchemaVersion:          CompiledSchemaVersion,
		Mode:                   ModeWorkspaceWrite,
		Approval:               ApprovalOnRequest,
		AllowedModes:           []Mode{ModeReadOnly, ModeWorkspaceWrite},
		Workspace:              Anchor{Path: "/home/u/proj", Exists: true, Dir: true},
		WritableRoots:          []Anchor{{Path: "/home/u/proj"}, {Path: "/tmp"}, {Path: "/home/u/.claude"}},
		FilesystemRules:        true,
		ReadAccess:             ReadAccessRestricted,
		ReadableRoots:          []Anchor{{Path: "/usr"}, {Path: "/home/u"}},
		ProtectedPatterns:      []ProtectedPattern{{Components: []string{".git", "hooks"}, Type: EntryAny}},
		ProtectedPaths:         []Anchor{{Path: "/home/u/proj/.git/hooks"}},
		ProtectedPathsComplete: true,
		DenyRead:               []Anchor{{Path: "/home/u/.ssh"}},
		DenyReadGlobs:          []NameGlob{{Within: "/home/u/proj", Include: ".env*", Exclude: []string{".env.example"}}},
		Network: Network{
			Policy: NetAllowlist,
			Allow: []NetRule{
				mustRule("api.anthropic.com:443"),
				mustRule("**.example.org"),
				mustRule("10.0.0.0/8:80,443,8000-8999"),
			},
			Loopback:          LoopbackSession,
			AllowUnixSockets:  []string{"/run/user/1000/bus"},
			MinTTLSeconds:     30,
			MaxTTLSeconds:     3600,
			UnknownHosts:      UnknownHostsAsk,
			AskTimeoutSeconds: 30,
		},
		Capabilities:             []Capability{{Name: "CAP_CHOWN"}, {Name: "CAP_FOWNER"}},
		Require:                  []Requirement{{Name: RequireBPFLSM}},
		ExcludedCommands:         []string{"docker"},
		AllowUnsandboxedCommands: true,
		Env:                      Env{Scrub: []string{"*_TOKEN"}, Passthrough: []string{"ANTHROPIC_API_KEY", "LANG"}},
		Limits:                   Limits{PidsMax: 512, MemoryMax: 2 << 30},
		Audit:                    Audit{Path: "/var/log/oxsupervise/audit.jsonl"},
		Permissions: Permissions{
			Default: ActionAsk,
			Rules: []PermissionRule{
				{Tool: "bash", Pattern: "git *", Action: ActionAllow},
				{Tool: "bash", Pattern: "rm *", Action: ActionDeny},
			},
			Agents:        map[string][]PermissionRule{"claude": {{Tool: "bash", Pattern: "npm *", Action: ActionAllow}}},
			AgentDefaults: map[string]Action{"codex": ActionDeny},
		},
	}
}

func mustRule(s string) NetRule {
	r, err := ParseNetRule(s)
	if err != nil {
		panic(err)
	}
	return r
}

func TestTightenEveryDimension(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  func(c *Compiled)
		// widen is the WidenError's Dimension and a piece of its Requested
		// value; empty means the request is allowed.
		widen, value string
		check        func(t *testing.T, out *Compiled)
	}{
		{name: "identical request", req: func(c *Compiled) {}},

		// Modes.
		{name: "mode read-only is tighter", req: func(c *Compiled) { c.Mode, c.WritableRoots = ModeReadOnly, nil }},
		{name: "mode external-sandbox widens", req: func(c *Compiled) { c.Mode = ModeExternalSandbox }, widen: "sandbox.mode", value: "external-sandbox"},
		{name: "mode full-access widens", req: func(c *Compiled) { c.Mode = ModeFullAccess }, widen: "sandbox.mode", value: "full-access"},
		{name: "allowed_modes narrowed", req: func(c *Compiled) { c.AllowedModes = []Mode{ModeReadOnly, ModeWorkspaceWrite} }},
		{name: "allowed_modes widened", req: func(c *Compiled) { c.AllowedModes = append(c.AllowedModes, ModeFullAccess) }, widen: "sandbox.allowed_modes", value: "full-access"},
		{name: "approval untrusted is tighter", req: func(c *Compiled) { c.Approval = ApprovalUntrusted }},
		{name: "approval never widens", req: func(c *Compiled) { c.Approval = ApprovalNever }, widen: "sandbox.approval", value: "never"},

		// Writable roots.
		{name: "root below a parent root", req: func(c *Compiled) {
			c.WritableRoots = []Anchor{{Path: "/home/u/proj/sub"}, {Path: "/tmp"}}
		}, check: func(t *testing.T, out *Compiled) {
			if len(out.WritableRoots) != 2 || out.WritableRoots[0].Path != "/home/u/proj/sub" {
				t.Errorf("writable roots = %v, want the child's", out.WritableRoots)
			}
		}},
		{name: "fewer roots", req: func(c *Compiled) { c.WritableRoots = c.WritableRoots[:1] }},
		{name: "root outside every parent root", req: func(c *Compiled) {
			c.WritableRoots = append(c.WritableRoots, Anchor{Path: "/home/u/.ssh"})
		}, widen: "sandbox.writable_roots", value: "/home/u/.ssh"},
		{name: "root above a parent root", req: func(c *Compiled) { c.WritableRoots = []Anchor{{Path: "/home/u"}} }, widen: "sandbox.writable_roots", value: "/home/u"},
		{name: "sibling with a shared prefix", req: func(c *Compiled) { c.WritableRoots = []Anchor{{Path: "/home/u/project2"}} }, widen: "sandbox.writable_roots", value: "/home/u/project2"},

		// Reads.
		{name: "read access full widens", req: func(c *Compiled) { c.ReadAccess, c.ReadableRoots = ReadAccessFull, nil }, widen: "sandbox.read_only_access", value: "full"},
		{name: "readable root below", req: func(c *Compiled) { c.ReadableRoots = []Anchor{{Path: "/usr/lib"}} }},
		{name: "readable root outside", req: func(c *Compiled) { c.ReadableRoots = append(c.ReadableRoots, Anchor{Path: "/etc"}) }, widen: "sandbox.readable_roots", value: "/etc"},

		// Protected names and deny-read: unions, never a widening.
		{name: "protected patterns are unioned", req: func(c *Compiled) {
			c.ProtectedPatterns = []ProtectedPattern{{Components: []string{".claude"}, Type: EntryAny}}
			c.ProtectedPaths = nil
		}, check: func(t *testing.T, out *Compiled) {
			if len(out.ProtectedPatterns) != 2 {
				t.Errorf("protected patterns = %v, want the child's .claude and the parent's .git/hooks", out.ProtectedPatterns)
			}
			if len(out.ProtectedPaths) != 1 || out.ProtectedPaths[0].Path != "/home/u/proj/.git/hooks" {
				t.Errorf("protected paths = %v, want the parent's", out.ProtectedPaths)
			}
		}},
		{name: "incomplete protected scan stays incomplete", req: func(c *Compiled) { c.ProtectedPathsComplete = false }, check: func(t *testing.T, out *Compiled) {
			if out.ProtectedPathsComplete {
				t.Error("ProtectedPathsComplete = true, want false (the child's scan was incomplete)")
			}
		}},
		{name: "deny-read is unioned", req: func(c *Compiled) {
			c.DenyRead = []Anchor{{Path: "/home/u/.aws"}}
			c.DenyReadGlobs = nil
		}, check: func(t *testing.T, out *Compiled) {
			var paths []string
			for _, a := range out.DenyRead {
				paths = append(paths, a.Path)
			}
			if !slices.Equal(paths, []string{"/home/u/.aws", "/home/u/.ssh"}) {
				t.Errorf("deny read = %v", paths)
			}
			if len(out.DenyReadGlobs) != 1 {
				t.Errorf("deny read globs = %v, want the parent's .env*", out.DenyReadGlobs)
			}
		}},

		// Network.
		{name: "network none is tighter", req: func(c *Compiled) { c.Network.Policy, c.Network.Allow = NetNone, nil }},
		{name: "network full widens", req: func(c *Compiled) { c.Network.Policy = NetFull }, widen: "network.policy", value: "full"},
		{name: "allow entry subset", req: func(c *Compiled) { c.Network.Allow = c.Network.Allow[:1] }},
		{name: "allow host below a ** parent", req: func(c *Compiled) {
			c.Network.Allow = []NetRule{mustRule("a.b.example.org:443"), mustRule("*.example.org"), mustRule("**.x.example.org")}
		}},
		{name: "allow narrower prefix and ports", req: func(c *Compiled) { c.Network.Allow = []NetRule{mustRule("10.1.2.0/24:8080-8090,443")} }},
		{name: "allow new host", req: func(c *Compiled) { c.Network.Allow = append(c.Network.Allow, mustRule("evil.example.com")) }, widen: "network.allow", value: "evil.example.com"},
		{name: "allow all ports of an entry limited to 443", req: func(c *Compiled) { c.Network.Allow = []NetRule{mustRule("api.anthropic.com")} }, widen: "network.allow", value: "api.anthropic.com"},
		{name: "allow wider prefix", req: func(c *Compiled) { c.Network.Allow = []NetRule{mustRule("10.0.0.0/7:443")} }, widen: "network.allow", value: "10.0.0.0/7"},
		{name: "allow port outside ranges", req: func(c *Compiled) { c.Network.Allow = []NetRule{mustRule("10.0.0.1:9000")} }, widen: "network.allow", value: "10.0.0.1:9000"},
		{name: "allow host where the parent has an address", req: func(c *Compiled) { c.Network.Allow = []NetRule{mustRule("ten.example.com:443")} }, widen: "network.allow", value: "ten.example.com"},
		{name: "allow ** where the parent has *", req: func(c *Compiled) {
			c.Network.Allow = []NetRule{mustRule("**.anthropic.com:443")}
		}, widen: "network.allow", value: "**.anthropic.com"},
		{name: "loopback none is tighter", req: func(c *Compiled) { c.Network.Loopback = LoopbackNone }},
		{name: "loopback all widens", req: func(c *Compiled) { c.Network.Loopback = LoopbackAll }, widen: "network.loopback", value: "all"},
		{name: "unix socket added", req: func(c *Compiled) { c.Network.AllowUnixSockets = []string{"/var/run/docker.sock"} }, widen: "network.allow_unix_sockets", value: "docker.sock"},
		{name: "unknown hosts deny is tighter", req: func(c *Compiled) { c.Network.UnknownHosts = UnknownHostsDeny }},
		{name: "no TTL floor is tighter", req: func(c *Compiled) { c.Network.MinTTLSeconds = 0 }},
		{name: "higher TTL floor widens", req: func(c *Compiled) { c.Network.MinTTLSeconds = 300 }, widen: "network.min_ttl_seconds", value: "300"},
		{name: "longer TTL cap widens", req: func(c *Compiled) { c.Network.MaxTTLSeconds = 7200 }, widen: "network.max_ttl_seconds", value: "7200"},
		{name: "no TTL cap widens", req: func(c *Compiled) { c.Network.MaxTTLSeconds = 0 }, widen: "network.max_ttl_seconds", value: "0 (unlimited)"},
		{name: "longer ask timeout widens", req: func(c *Compiled) { c.Network.AskTimeoutSeconds = 60 }, widen: "network.ask_timeout_seconds", value: "60"},

		// Limits.
		{name: "lower limits", req: func(c *Compiled) { c.Limits = Limits{PidsMax: 64, MemoryMax: 1 << 30} }},
		{name: "no limit of its own inherits the parent's", req: func(c *Compiled) { c.Limits = Limits{} }, check: func(t *testing.T, out *Compiled) {
			if out.Limits != (Limits{PidsMax: 512, MemoryMax: 2 << 30}) {
				t.Errorf("limits = %+v, want the parent's", out.Limits)
			}
		}},
		{name: "higher pids.max widens", req: func(c *Compiled) { c.Limits.PidsMax = 4096 }, widen: "limits.pids_max", value: "4096"},
		{name: "higher memory.max widens", req: func(c *Compiled) { c.Limits.MemoryMax = 8 << 30 }, widen: "limits.memory_max", value: "8589934592"},

		// Environment.
		{name: "passthrough narrowed", req: func(c *Compiled) { c.Env.Passthrough = []string{"LANG"} }},
		{name: "passthrough widened", req: func(c *Compiled) { c.Env.Passthrough = append(c.Env.Passthrough, "GITHUB_TOKEN") }, widen: "env.passthrough", value: "GITHUB_TOKEN"},
		{name: "scrub is unioned", req: func(c *Compiled) { c.Env.Scrub = []string{"ANTHROPIC_*"} }, check: func(t *testing.T, out *Compiled) {
			if !slices.Equal(out.Env.Scrub, []string{"ANTHROPIC_*", "*_TOKEN"}) {
				t.Errorf("scrub = %v", out.Env.Scrub)
			}
		}},

		// Capabilities and required mechanisms.
		{name: "fewer capabilities", req: func(c *Compiled) { c.Capabilities = c.Capabilities[:1] }},
		{name: "capability added", req: func(c *Compiled) { c.Capabilities = append(c.Capabilities, Capability{Name: "CAP_SYS_ADMIN"}) }, widen: "sandbox.capabilities", value: "CAP_SYS_ADMIN"},
		{name: "requirements are inherited", req: func(c *Compiled) { c.Require = nil }, check: func(t *testing.T, out *Compiled) {
			if len(out.Require) != 1 || out.Require[0].Name != RequireBPFLSM {
				t.Errorf("require = %v, want the parent's bpf-lsm", out.Require)
			}
		}},

		// The escape hatch.
		{name: "unsandboxed commands turned off", req: func(c *Compiled) { c.AllowUnsandboxedCommands, c.ExcludedCommands = false, nil }},
		{name: "excluded command added", req: func(c *Compiled) { c.ExcludedCommands = []string{"docker", "bash"} }, widen: "sandbox.excluded_commands", value: "bash"},

		// Permission rules.
		{name: "child deny rule added", req: func(c *Compiled) {
			c.Permissions.Rules = []PermissionRule{{Tool: "bash", Pattern: "curl *", Action: ActionDeny}}
		}, check: func(t *testing.T, out *Compiled) {
			if len(out.Permissions.Rules) != 3 {
				t.Errorf("rules = %v, want the parent's two and the child's deny", out.Permissions.Rules)
			}
			if d := out.Permissions.Check("bash", "git status && rm -rf x", ""); d.Action != ActionDeny {
				t.Errorf("the parent's rm deny was lost: %+v", d)
			}
		}},
		{name: "child allow rule added", req: func(c *Compiled) {
			c.Permissions.Rules = append(c.Permissions.Rules, PermissionRule{Tool: "bash", Pattern: "curl *", Action: ActionAllow})
		}, widen: "permissions.rules", value: "curl *"},
		{name: "default allow widens", req: func(c *Compiled) { c.Permissions.Default = ActionAllow }, widen: "permissions.default", value: "allow"},
		{name: "agent override looser than a global deny", req: func(c *Compiled) {
			c.Permissions.Agents = map[string][]PermissionRule{"claude": {{Tool: "bash", Pattern: "rm *", Action: ActionAsk}}}
		}, widen: "agent.claude.permission.rules", value: "rm *"},
		{name: "agent default looser than the parent's", req: func(c *Compiled) {
			c.Permissions.AgentDefaults = map[string]Action{"codex": ActionAsk}
		}, widen: "agent.codex.permission.default", value: "ask"},
		{name: "agent rules and defaults inherited", req: func(c *Compiled) { c.Permissions.Agents, c.Permissions.AgentDefaults = nil, nil }, check: func(t *testing.T, out *Compiled) {
			if d := out.Permissions.Check("bash", "ls", "codex"); d.Action != ActionDeny {
				t.Errorf("codex default = %s, want the parent's deny", d.Action)
			}
			if d := out.Permissions.Check("bash", "npm test", "claude"); d.Action != ActionAllow {
				t.Errorf("claude's npm rule = %s, want the parent's allow", d.Action)
			}
		}},

		// Audit is the parent's.
		{name: "audit path is the parent's", req: func(c *Compiled) { c.Audit.Path = "/tmp/elsewhere.jsonl" }, check: func(t *testing.T, out *Compiled) {
			if out.Audit.Path != "/var/log/oxsupervise/audit.jsonl" {
				t.Errorf("audit path = %q, want the parent's", out.Audit.Path)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, req := tightenParent(), tightenParent()
			tc.req(req)
			before, _ := parent.Digest()
			reqBefore, _ := req.Digest()
			out, err := Tighten(parent, req)
			if after, _ := parent.Digest(); after != before {
				t.Error("Tighten modified the parent")
			}
			if after, _ := req.Digest(); after != reqBefore {
				t.Error("Tighten modified the request")
			}
			if tc.widen == "" {
				if err != nil {
					t.Fatalf("Tighten: %v", err)
				}
				if tc.check != nil {
					tc.check(t, out)
				}
				return
			}
			if out != nil || err == nil {
				t.Fatalf("Tighten accepted a widening of %s", tc.widen)
			}
			if !errors.Is(err, ErrWidens) {
				t.Errorf("error %v does not match ErrWidens", err)
			}
			var we *WidenError
			if !errors.As(err, &we) {
				t.Fatalf("error %v is not a WidenError", err)
			}
			if we.Dimension != tc.widen || !strings.Contains(we.Requested, tc.value) {
				t.Errorf("widening = %+v, want dimension %s naming %q", we, tc.widen, tc.value)
			}
			if !strings.Contains(err.Error(), tc.widen) || !strings.Contains(err.Error(), tc.value) {
				t.Errorf("message %q does not name %s and %q", err, tc.widen, tc.value)
			}
		})
	}
}

// TestTightenLooseParents: a parent without filesystem rules or network
// rules has nothing on those dimensions for a child to exceed, and a
// child that adds rules is tighter.
func TestTightenLooseParents(t *testing.T) {
	parent := tightenParent()
	parent.Mode, parent.FilesystemRules, parent.AllowedModes = ModeFullAccess, false, nil
	parent.Network = Network{Policy: NetFull, Loopback: LoopbackAll, MinTTLSeconds: 30, MaxTTLSeconds: 3600, AskTimeoutSeconds: 30}
	parent.Limits = Limits{}
	req := tightenParent()
	req.WritableRoots = append(req.WritableRoots, Anchor{Path: "/srv"})
	req.ReadAccess = ReadAccessFull
	req.Network.AllowUnixSockets = []string{"/var/run/docker.sock"}
	req.Limits = Limits{PidsMax: 10}
	out, err := Tighten(parent, req)
	if err != nil {
		t.Fatalf("Tighten under a full-access parent: %v", err)
	}
	if out.Mode != ModeWorkspaceWrite || !out.FilesystemRules || out.Network.Policy != NetAllowlist || out.Limits.PidsMax != 10 {
		t.Errorf("child = mode %s, fs rules %t, network %s, pids %d; want the child's tighter request", out.Mode, out.FilesystemRules, out.Network.Policy, out.Limits.PidsMax)
	}
}

// TestTightenReportsEveryWidening: a request wide on several dimensions
// names each of them, not just the first.
func TestTightenReportsEveryWidening(t *testing.T) {
	req := tightenParent()
	req.Mode = ModeFullAccess
	req.Network.Policy = NetFull
	req.Env.Passthrough = append(req.Env.Passthrough, "AWS_SECRET_ACCESS_KEY")
	_, err := Tighten(tightenParent(), req)
	for _, dim := range []string{"sandbox.mode", "network.policy", "env.passthrough"} {
		if err == nil || !strings.Contains(err.Error(), dim) {
			t.Errorf("error %v does not name %s", err, dim)
		}
	}
}

func TestFormatNetRuleRoundTrips(t *testing.T) {
	for _, s := range []string{"github.com", "*.npmjs.org:443", "10.0.0.0/8:80,8000-8999", "192.0.2.7", "[2001:db8::1]:22", "2001:db8::/32"} {
		r := mustRule(s)
		back, err := ParseNetRule(FormatNetRule(r))
		if err != nil {
			t.Fatalf("%s -> %s: %v", s, FormatNetRule(r), err)
		}
		if back.Host != r.Host || back.Prefix != r.Prefix || !slices.Equal(back.Ports, r.Ports) {
			t.Errorf("%s -> %s -> %+v", s, FormatNetRule(r), back)
		}
	}
}

// TestTightenLoadedPolicies: what a nested `run` meets in practice, a
// request compiled from the same files as its parent plus its own flags.
func TestTightenLoadedPolicies(t *testing.T) {
	f := newFixture(t)
	// The fixture lives below /tmp: keep /tmp out of the writable roots so
	// that a root beside the parent's is outside all of them.
	f.write(t, "home/.openoxide/config.toml", "[sandbox]\nexclude_slash_tmp = true\n")
	scratch := f.mkdir(t, "home/scratch")
	parentArgs := []string{"--allow-net", "github.com:443", "--writable-root", scratch}
	parent, _, _ := f.mustLoad(t, parentArgs...)
	for _, tc := range []struct {
		args  []string
		widen string
	}{
		{args: parentArgs},
		{args: []string{"--allow-net", "github.com:443"}},
		{args: []string{"-s", "read-only"}},
		{args: []string{"--net", "none"}},
		{args: append(slices.Clone(parentArgs), "--net", "full"), widen: "network.policy"},
		{args: append(slices.Clone(parentArgs), "--allow-net", "example.com"), widen: "network.allow"},
		{args: append(slices.Clone(parentArgs), "--writable-root", f.mkdir(t, "home/other")), widen: "sandbox.writable_roots"},
		{args: []string{"--yolo"}, widen: "sandbox.mode"},
	} {
		req, _, _ := f.mustLoad(t, tc.args...)
		_, err := Tighten(parent, req)
		if tc.widen == "" && err != nil {
			t.Errorf("run %v inside run %v: %v", tc.args, parentArgs, err)
		}
		if tc.widen != "" && (err == nil || !strings.Contains(err.Error(), tc.widen)) {
			t.Errorf("run %v inside run %v: error %v, want a widening of %s", tc.args, parentArgs, err, tc.widen)
		}
	}
}

// TestTightenCheckedAtEnd: a child may create a CheckedAtEnd entry (a
// worktree's .git file) only where its parent may too.
func TestTightenCheckedAtEnd(t *testing.T) {
	gitFile := ProtectedPattern{Components: []string{".git"}, Type: EntryFile, CheckedAtEnd: true}
	for _, tc := range []struct {
		name          string
		parent, child bool
		want          bool
	}{
		{"both allow", true, true, true},
		{"parent refuses", false, true, false},
		{"child refuses", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, req := tightenParent(), tightenParent()
			p, c := gitFile, gitFile
			p.CheckedAtEnd, c.CheckedAtEnd = tc.parent, tc.child
			parent.ProtectedPatterns = append(parent.ProtectedPatterns, p)
			req.ProtectedPatterns = append(req.ProtectedPatterns, c)
			out, err := Tighten(parent, req)
			if err != nil {
				t.Fatal(err)
			}
			var got []bool
			for _, q := range out.ProtectedPatterns {
				if len(q.Components) == 1 && q.Components[0] == ".git" {
					got = append(got, q.CheckedAtEnd)
				}
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf(".git patterns' CheckedAtEnd = %v, want [%v]", got, tc.want)
			}
		})
	}
}

// TestDefaultCheckedAtEnd: only git's .git file and a worktree's commondir
// may be created and checked at the session's end, both file patterns.
func TestDefaultCheckedAtEnd(t *testing.T) {
	var got []string
	for _, p := range defaultProtectedPatterns("escalation") {
		if p.CheckedAtEnd {
			if p.Type != EntryFile {
				t.Errorf("%v: CheckedAtEnd on a %s pattern", p.Components, p.Type)
			}
			got = append(got, strings.Join(p.Components, "/"))
		}
	}
	if want := []string{".git", ".git/worktrees/*/commondir"}; !slices.Equal(got, want) {
		t.Errorf("CheckedAtEnd patterns %q, want %q", got, want)
	}
	for _, p := range defaultProtectedPatterns("all") {
		if p.CheckedAtEnd {
			t.Errorf("protect_git = all: %v is CheckedAtEnd", p.Components)
		}
	}
}
