package policy

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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
