package windows

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/policy"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/windows")

const testSession = "s-20261130-abc123"

func anchor(p string, isDir bool) policy.Anchor {
	return policy.Anchor{Path: p, Dir: isDir, Exists: true, Source: "test"}
}

func workspaceWrite() *policy.Compiled {
	return &policy.Compiled{
		SchemaVersion:   policy.CompiledSchemaVersion,
		Mode:            policy.ModeWorkspaceWrite,
		Workspace:       anchor(`C:\Users\dev\src\app`, true),
		WritableRoots:   []policy.Anchor{anchor(`C:\Users\dev\src\app`, true), anchor(`C:\Users\dev\AppData\Local\Temp`, true)},
		FilesystemRules: true,
		ReadAccess:      policy.ReadAccessFull,
		ProtectedPatterns: []policy.ProtectedPattern{
			{Components: []string{".git", "hooks"}}, {Components: []string{".codex"}}, {Components: []string{"AGENTS.md"}, Type: policy.EntryFile},
		},
		ProtectedPaths: []policy.Anchor{
			anchor(`C:\Users\dev\src\app\.git\hooks`, true),
			anchor(`C:\Users\dev\src\app\vendor\lib\.git\config`, false),
			anchor(`C:\Users\dev\src\app\AGENTS.md`, false),
			anchor(`D:\elsewhere\repo.git\hooks`, true), // a gitdir: target outside every root
		},
		DenyRead: []policy.Anchor{anchor(`C:\Users\dev\.ssh`, true)},
		Network:  policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackNone},
		Limits:   policy.Limits{PidsMax: 512, MemoryMax: 4 << 30},
	}
}

func TestSessionSID(t *testing.T) {
	a, err := SessionSID(testSession)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := SessionSID(testSession)
	c, _ := SessionSID(testSession + "x")
	if a != b {
		t.Errorf("SessionSID is not deterministic: %s vs %s", a, b)
	}
	if a == c {
		t.Errorf("different sessions share SID %s", a)
	}
	parts := strings.Split(a, "-")
	if len(parts) != 8 || strings.Join(parts[:4], "-") != "S-1-5-21" {
		t.Errorf("SID %s is not S-1-5-21-a-b-c-d", a)
	}
	for _, bad := range []string{"", "a b", `..\x`, strings.Repeat("x", 65)} {
		if _, err := SessionSID(bad); err == nil {
			t.Errorf("SessionSID(%q) accepted", bad)
		}
	}
}

func TestNewPlanGolden(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*policy.Compiled)
		env    Environment
	}{
		{name: "workspace-write-degraded", env: Environment{AllowDegraded: true}, mutate: func(*policy.Compiled) {}},
		{name: "workspace-write-net-full-no-deny-read", mutate: func(c *policy.Compiled) {
			c.Network.Policy = policy.NetFull
			c.DenyRead = nil
		}},
		{name: "read-only-net-full", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeReadOnly
			c.WritableRoots = nil
			c.DenyRead = nil
			c.Network.Policy = policy.NetFull
		}},
		{name: "external-sandbox-elevated-degraded", env: Environment{Elevated: true, AllowDegraded: true}, mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeExternalSandbox
			c.FilesystemRules = false
		}},
		{name: "full-access", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeFullAccess
			c.FilesystemRules = false
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := workspaceWrite()
			tt.mutate(c)
			p, err := NewPlan(c, testSession, tt.env)
			if err != nil {
				t.Fatalf("NewPlan: %v", err)
			}
			got, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			file := filepath.Join("..", "testdata", "windows", tt.name+".json")
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("read golden (go test ./windows -update creates it): %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("plan differs from %s:\n%s", file, got)
			}
		})
	}
}

func TestPlanWorkspaceWriteACEs(t *testing.T) {
	p, err := NewPlan(workspaceWrite(), testSession, Environment{AllowDegraded: true})
	if err != nil {
		t.Fatal(err)
	}
	find := func(path string, kind ACEKind) *ACE {
		for i := range p.ACEs {
			if strings.EqualFold(p.ACEs[i].Path, path) && p.ACEs[i].Kind == kind {
				return &p.ACEs[i]
			}
		}
		return nil
	}
	for _, a := range p.ACEs {
		if a.SID != p.SessionSID {
			t.Errorf("ACE on %s names %s, not the session SID", a.Path, a.SID)
		}
	}
	root := find(`C:\Users\dev\src\app`, ACEAllow)
	if root == nil || !root.Inherit || root.Mask != MaskWritableRoot {
		t.Fatalf("workspace allow ACE = %+v", root)
	}
	if root.Mask&fileDeleteChild != 0 {
		t.Error("writable-root grant includes FILE_DELETE_CHILD, which would override deny-DELETE on protected children")
	}
	hooks := find(`C:\Users\dev\src\app\.git\hooks`, ACEDeny)
	if hooks == nil || !hooks.Inherit || hooks.Mask != MaskProtected {
		t.Fatalf("hooks deny ACE = %+v", hooks)
	}
	for _, bit := range []uint32{fileWriteData, fileAppendData, accessDelete, accessWriteDAC, accessWriteOwner, fileWriteAttributes} {
		if hooks.Mask&bit == 0 {
			t.Errorf("protected mask lacks %#x", bit)
		}
	}
	if f := find(`C:\Users\dev\src\app\AGENTS.md`, ACEDeny); f == nil || f.Inherit {
		t.Errorf("file deny ACE = %+v, want non-inheritable", f)
	}
	if f := find(`D:\elsewhere\repo.git\hooks`, ACEDeny); f != nil {
		t.Errorf("planned an ACE outside every writable root: %+v", f)
	}
	for _, anc := range []string{`C:\Users\dev\src\app\.git`, `C:\Users\dev\src\app\vendor\lib\.git`, `C:\Users\dev\src\app\vendor\lib`, `C:\Users\dev\src\app\vendor`} {
		a := find(anc, ACEDeny)
		if a == nil || a.Mask != MaskNoDelete || a.Inherit {
			t.Errorf("ancestor %s: ACE %+v, want non-inheritable deny DELETE", anc, a)
		}
	}
	if a := find(`C:\Users\dev\src`, ACEDeny); a != nil {
		t.Errorf("ancestor outside the root got an ACE: %+v", a)
	}
	if !p.Token.Restricted || p.Token.Flags&TokenWriteRestricted == 0 || p.Token.RestrictingSIDs[0] != p.SessionSID {
		t.Errorf("token plan = %+v", p.Token)
	}
	if p.Job.LimitFlags&JobLimitKillOnJobClose == 0 || p.Job.LimitFlags&jobLimitBreakawayOK != 0 || p.Job.ActiveProcessLimit != 512 {
		t.Errorf("job plan = %+v", p.Job)
	}
	if p.Job.UIRestrictions&(JobUILimitDesktop|JobUILimitReadClipboard|JobUILimitWriteClipboard|JobUILimitGlobalAtoms) == 0 {
		t.Errorf("job UI restrictions = %#x", p.Job.UIRestrictions)
	}
}

func TestDegradedDecisions(t *testing.T) {
	tests := []struct {
		name        string
		mutate      func(*policy.Compiled)
		env         Environment
		wantErr     string
		wantMissing []string
	}{
		{name: "deny-read refused", mutate: func(c *policy.Compiled) { c.Network.Policy = policy.NetFull },
			wantErr: "denied-read"},
		{name: "deny-read glob refused", mutate: func(c *policy.Compiled) {
			c.Network.Policy = policy.NetFull
			c.DenyRead = nil
			c.DenyReadGlobs = []policy.NameGlob{{Within: `C:\w`, Include: ".env*"}}
		}, wantErr: "denied-read"},
		{name: "deny-read accepted degraded", env: Environment{AllowDegraded: true}, mutate: func(c *policy.Compiled) { c.Network.Policy = policy.NetFull },
			wantMissing: []string{"protected-future-entries", "deny-read"}},
		{name: "network none refused unelevated", mutate: func(c *policy.Compiled) { c.DenyRead = nil },
			wantErr: "need an elevated supervisor"},
		{name: "network none refused elevated", env: Environment{Elevated: true}, mutate: func(c *policy.Compiled) { c.DenyRead = nil },
			wantErr: "not implemented"},
		{name: "allowlist refused", mutate: func(c *policy.Compiled) { c.DenyRead = nil; c.Network.Policy = policy.NetAllowlist },
			wantErr: "network policy \"allowlist\""},
		{name: "network none accepted degraded", env: Environment{AllowDegraded: true}, mutate: func(c *policy.Compiled) { c.DenyRead = nil },
			wantMissing: []string{"protected-future-entries", "network"}},
		{name: "external network none refused", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeExternalSandbox
			c.FilesystemRules = false
		}, wantErr: "NOT enforced"},
		{name: "external net full fine", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeExternalSandbox
			c.FilesystemRules = false
			c.Network.Policy = policy.NetFull
		}, wantMissing: nil},
		{name: "read-only net full no deny-read", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeReadOnly
			c.WritableRoots = nil
			c.DenyRead = nil
			c.Network.Policy = policy.NetFull
		}, wantMissing: nil},
		{name: "full access", mutate: func(c *policy.Compiled) {
			c.Mode = policy.ModeFullAccess
			c.FilesystemRules = false
		}, wantMissing: []string{"sandbox"}},
		{name: "volume root refused", env: Environment{AllowDegraded: true}, mutate: func(c *policy.Compiled) {
			c.WritableRoots = []policy.Anchor{anchor(`C:\`, true)}
		}, wantErr: "volume root"},
		{name: "unc share root refused", env: Environment{AllowDegraded: true}, mutate: func(c *policy.Compiled) {
			c.WritableRoots = []policy.Anchor{anchor(`\\srv\share`, true)}
		}, wantErr: "volume root"},
		{name: "relative root refused", env: Environment{AllowDegraded: true}, mutate: func(c *policy.Compiled) {
			c.WritableRoots = []policy.Anchor{anchor(`src\app`, true)}
		}, wantErr: "not an absolute Windows path"},
		{name: "ADS refused", env: Environment{AllowDegraded: true}, mutate: func(c *policy.Compiled) {
			c.ProtectedPaths = []policy.Anchor{anchor(`C:\Users\dev\src\app\x:stream`, false)}
		}, wantErr: "alternate data stream"},
		{name: "device path refused", env: Environment{AllowDegraded: true}, mutate: func(c *policy.Compiled) {
			c.WritableRoots = []policy.Anchor{anchor(`\\?\C:\x`, true)}
		}, wantErr: "device or extended-length"},
		{name: "dotdot refused", env: Environment{AllowDegraded: true}, mutate: func(c *policy.Compiled) {
			c.WritableRoots = []policy.Anchor{anchor(`C:\a\..\b`, true)}
		}, wantErr: `contains ".."`},
		{name: "inconsistent read-only", env: Environment{AllowDegraded: true}, mutate: func(c *policy.Compiled) { c.Mode = policy.ModeReadOnly },
			wantErr: "inconsistent"},
		{name: "unknown mode", mutate: func(c *policy.Compiled) { c.Mode = "bogus" }, wantErr: "unknown mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := workspaceWrite()
			tt.mutate(c)
			p, err := NewPlan(c, testSession, tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(tt.wantErr, "denied-read") || strings.Contains(tt.wantErr, "network") || strings.Contains(tt.wantErr, "NOT") {
					if !errors.Is(err, ErrUnsupportedPolicy) {
						t.Errorf("refusal %v is not ErrUnsupportedPolicy", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("NewPlan: %v", err)
			}
			var got []string
			for _, g := range p.Missing() {
				got = append(got, g.Name)
			}
			if strings.Join(got, ",") != strings.Join(tt.wantMissing, ",") {
				t.Errorf("missing guarantees = %v, want %v", got, tt.wantMissing)
			}
		})
	}
}

func TestStartRecord(t *testing.T) {
	p, err := NewPlan(workspaceWrite(), testSession, Environment{AllowDegraded: true})
	if err != nil {
		t.Fatal(err)
	}
	r := p.StartRecord("sha256:00")
	r.Normalize()
	if err := r.Validate(); err != nil {
		t.Fatalf("record invalid: %v", err)
	}
	if r.Ox.Layer != audit.LayerJob || r.Ox.Session != testSession || !strings.Contains(r.Message, "DEGRADED") ||
		!strings.Contains(r.Event.Reason, "deny-read") || !strings.Contains(r.Event.Reason, "network") {
		t.Errorf("record = %+v", r)
	}
}

func TestWinPathHelpers(t *testing.T) {
	if got := winAncestors(`C:\a\b\c`); strings.Join(got, "|") != `C:\a\b|C:\a` {
		t.Errorf("winAncestors = %q", got)
	}
	if got := winAncestors(`\\srv\share\a\b`); strings.Join(got, "|") != `\\srv\share\a` {
		t.Errorf("winAncestors UNC = %q", got)
	}
	if r := containingRoot(`c:\USERS\dev\x`, []string{`C:\Users\dev`}); r != `C:\Users\dev` {
		t.Errorf("containingRoot case-insensitive = %q", r)
	}
	if r := containingRoot(`C:\Users\developer`, []string{`C:\Users\dev`}); r != "" {
		t.Errorf("containingRoot matched a sibling prefix: %q", r)
	}
	if p, err := cleanWinPath("x", `C:/Users/dev/`); err != nil || p != `C:\Users\dev` {
		t.Errorf("cleanWinPath = %q, %v", p, err)
	}
}

func TestStartRecordWhenEnforced(t *testing.T) {
	c := workspaceWrite()
	c.Mode = policy.ModeReadOnly
	c.WritableRoots = nil
	c.DenyRead = nil
	c.Network.Policy = policy.NetFull
	p, err := NewPlan(c, testSession, Environment{})
	if err != nil {
		t.Fatal(err)
	}
	r := p.StartRecord("")
	r.Normalize()
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.Message, "DEGRADED") || r.Event.Reason != "" {
		t.Errorf("fully enforced plan recorded as degraded: %+v", r)
	}
}

func TestCheckStateDir(t *testing.T) {
	p, err := NewPlan(workspaceWrite(), testSession, Environment{AllowDegraded: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckStateDir(`C:\Users\dev\AppData\Local\oxsupervise\acl-journal`); err != nil {
		t.Errorf("private state dir refused: %v", err)
	}
	for _, bad := range []string{`C:\Users\dev\src\app\.state`, `c:\users\dev\appdata\local\temp\j`, `state`} {
		if err := p.CheckStateDir(bad); err == nil {
			t.Errorf("CheckStateDir(%q) accepted", bad)
		}
	}
}
