//go:build linux

package landlock

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/launcher"
	"github.com/openoxide/oxsupervise/policy"
)

// tree builds root/{a, b/, link->home/.ssh, home/{.ssh/key, notes, x/}}.
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"b", "home/.ssh", "home/x"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a", "home/.ssh/key", "home/notes"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "home/.ssh"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestSplitGrant(t *testing.T) {
	root := tree(t)
	const dirOnly = unix.LANDLOCK_ACCESS_FS_READ_DIR
	for _, tc := range []struct {
		name   string
		denied []string
		want   map[string]uint64 // relative path -> access
	}{
		{"nothing denied", nil, map[string]uint64{".": readRights}},
		{"denied elsewhere", []string{"/elsewhere/.ssh"}, map[string]uint64{".": readRights}},
		{"root denied", []string{root}, map[string]uint64{}},
		{"dir denied", []string{filepath.Join(root, "home/.ssh")}, map[string]uint64{
			".": dirOnly, "a": readRights & launcher.LandlockFileRights, "b": readRights,
			"home": dirOnly, "home/notes": readRights & launcher.LandlockFileRights, "home/x": readRights,
		}},
		{"missing anchor still splits its parent", []string{filepath.Join(root, "home/.aws")}, map[string]uint64{
			".": dirOnly, "a": readRights & launcher.LandlockFileRights, "b": readRights,
			"home": dirOnly, "home/.ssh": readRights, "home/notes": readRights & launcher.LandlockFileRights, "home/x": readRights,
		}},
		{"file denied", []string{filepath.Join(root, "home/notes")}, map[string]uint64{
			".": dirOnly, "a": readRights & launcher.LandlockFileRights, "b": readRights,
			"home": dirOnly, "home/.ssh": readRights, "home/x": readRights,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := splitGrant(root, readRights, tc.denied)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]uint64{}
			for _, r := range rules {
				rel, _ := filepath.Rel(root, r.Path)
				if _, dup := got[rel]; dup {
					t.Errorf("duplicate rule for %s", rel)
				}
				got[rel] = r.Access
			}
			if len(got) != len(tc.want) {
				t.Errorf("got %d rules %v, want %d %v", len(got), keys(got), len(tc.want), keys(tc.want))
			}
			for p, a := range tc.want {
				if got[p] != a {
					t.Errorf("%s: access %#x, want %#x", p, got[p], a)
				}
			}
			if _, ok := got["link"]; ok {
				t.Error("a rule was placed on a symlink (it would land on its target)")
			}
		})
	}
}

func keys(m map[string]uint64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func anchor(t *testing.T, p string) policy.Anchor {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return policy.Anchor{Path: p}
	}
	return policy.Anchor{Path: p, Dev: st.Dev, Ino: st.Ino, Dir: st.Mode&unix.S_IFMT == unix.S_IFDIR, Exists: true}
}

func TestPlanModes(t *testing.T) {
	root := tree(t)
	ws := filepath.Join(root, "b")
	base := func(mode policy.Mode, fsRules bool) *policy.Compiled {
		return &policy.Compiled{
			Mode: mode, FilesystemRules: fsRules, ReadAccess: policy.ReadAccessFull,
			Workspace: anchor(t, ws),
			DenyRead:  []policy.Anchor{anchor(t, filepath.Join(root, "home/.ssh")), anchor(t, filepath.Join(ws, ".env"))},
		}
	}
	ww := base(policy.ModeWorkspaceWrite, true)
	ww.WritableRoots = []policy.Anchor{anchor(t, ws)}
	if err := os.WriteFile(filepath.Join(ws, ".env"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ww.DenyRead[1] = anchor(t, filepath.Join(ws, ".env"))

	for _, tc := range []struct {
		name       string
		c          *policy.Compiled
		abi        int
		wantErr    bool
		wantEmpty  bool
		wantFS     bool
		wantWrite  []string // paths that must carry WRITE_FILE
		wantMasked []string
		wantScope  bool
		wantFlags  uint32
	}{
		{name: "full-access", c: base(policy.ModeFullAccess, false), abi: 7, wantEmpty: true},
		{name: "external-sandbox", c: base(policy.ModeExternalSandbox, false), abi: 7, wantScope: true,
			wantFlags: unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON},
		{name: "external-sandbox abi5", c: base(policy.ModeExternalSandbox, false), abi: 5, wantEmpty: true},
		{name: "read-only", c: base(policy.ModeReadOnly, true), abi: 7, wantFS: true, wantScope: true,
			wantWrite: []string{"/dev/null"}, wantFlags: unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON},
		{name: "workspace-write", c: ww, abi: 7, wantFS: true, wantScope: true,
			wantWrite: []string{ws, "/dev/null"}, wantMasked: []string{filepath.Join(ws, ".env")},
			wantFlags: unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON},
		{name: "workspace-write abi6 has no log flag", c: ww, abi: 6, wantFS: true, wantScope: true,
			wantWrite: []string{ws, "/dev/null"}, wantMasked: []string{filepath.Join(ws, ".env")}},
		{name: "abi2 cannot control truncate", c: ww, abi: 2, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, _, err := Plan(tc.c, tc.abi)
			if tc.wantErr {
				if err == nil {
					t.Fatal("Plan succeeded, want a refusal")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rs.Empty() != tc.wantEmpty {
				t.Fatalf("Empty() = %v, want %v", rs.Empty(), tc.wantEmpty)
			}
			if (rs.HandledFS != 0) != tc.wantFS {
				t.Errorf("HandledFS = %#x, want filesystem rules %v", rs.HandledFS, tc.wantFS)
			}
			if (rs.Scoped != 0) != tc.wantScope {
				t.Errorf("Scoped = %#x, want scoping %v", rs.Scoped, tc.wantScope)
			}
			if rs.RestrictFlags != tc.wantFlags {
				t.Errorf("RestrictFlags = %#x, want %#x", rs.RestrictFlags, tc.wantFlags)
			}
			writable := map[string]bool{}
			for _, r := range rs.Rules {
				if r.Access&unix.LANDLOCK_ACCESS_FS_WRITE_FILE != 0 {
					writable[r.Path] = true
				}
				if r.Path == filepath.Join(root, "home/.ssh") || r.Path == filepath.Join(root, "home/.ssh/key") {
					t.Errorf("rule on denied path %s", r.Path)
				}
				if r.Access&^rs.HandledFS != 0 {
					t.Errorf("rule %s grants unhandled rights %#x", r.Path, r.Access&^rs.HandledFS)
				}
			}
			for _, p := range tc.wantWrite {
				if !writable[p] {
					t.Errorf("%s not writable", p)
				}
				delete(writable, p)
			}
			for p := range writable {
				if !contains(devices, p) && p != "/dev/shm" {
					t.Errorf("unexpected writable %s", p)
				}
			}
			if len(rs.Masked) != len(tc.wantMasked) || (len(tc.wantMasked) > 0 && rs.Masked[0] != tc.wantMasked[0]) {
				t.Errorf("Masked = %v, want %v", rs.Masked, tc.wantMasked)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func TestPlanMountsPinsGitDir(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	for _, d := range []string{"ws/.git/hooks", "ws/nested/.git/modules/m/hooks", "ws/.claude"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &policy.Compiled{
		Mode: policy.ModeWorkspaceWrite, FilesystemRules: true,
		WritableRoots: []policy.Anchor{anchor(t, ws)},
		ProtectedPatterns: []policy.ProtectedPattern{
			{Components: []string{".git", "hooks"}}, {Components: []string{".claude"}},
		},
		ProtectedPaths: []policy.Anchor{
			anchor(t, filepath.Join(ws, ".git/hooks")),
			anchor(t, filepath.Join(ws, "nested/.git/modules/m/hooks")),
			anchor(t, filepath.Join(ws, ".claude")),
			anchor(t, filepath.Join(ws, "missing")),
		},
	}
	mounts, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	m, err := PlanMounts(c, nil, mounts)
	if err != nil {
		t.Fatal(err)
	}
	wantPinned := []string{
		filepath.Join(ws, ".git"),
		filepath.Join(ws, "nested/.git"), filepath.Join(ws, "nested/.git/modules"), filepath.Join(ws, "nested/.git/modules/m"),
	}
	if len(m.Pinned) != len(wantPinned) {
		t.Fatalf("Pinned = %v, want %v", m.Pinned, wantPinned)
	}
	for i := range wantPinned {
		if m.Pinned[i] != wantPinned[i] {
			t.Errorf("Pinned[%d] = %s, want %s", i, m.Pinned[i], wantPinned[i])
		}
	}
	if len(m.Protected) != 3 {
		t.Errorf("Protected = %v, want the 3 existing paths", m.Protected)
	}
	if !contains(m.ReadOnly, "/sys") || !contains(m.ReadOnly, "/proc/sys") {
		t.Errorf("ReadOnly = %v, want /sys and /proc/sys", m.ReadOnly)
	}
}

// TestABIMatchesProbe compares ABI with a direct syscall.
func TestABIMatchesProbe(t *testing.T) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	got, err := ABI()
	if errno != 0 {
		if err == nil {
			t.Fatalf("ABI() = %d, but the kernel says %v", got, errno)
		}
		t.Skipf("Landlock unusable here (%v)", errno)
	}
	if err != nil || got != int(v) {
		t.Fatalf("ABI() = %d, %v; kernel says %d", got, err, v)
	}
}

// TestPrepareRefusesSymlinkedPath proves a rule is never granted through a
// symlink swapped into its path after Plan: following it would grant the
// rule's rights (write, for a writable root) wherever the link points.
func TestPrepareRefusesSymlinkedPath(t *testing.T) {
	abi, err := ABI()
	if err != nil {
		t.Skipf("Landlock unusable here (%v): Prepare cannot create a ruleset", err)
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	ws := filepath.Join(dir, "ws")
	for _, d := range []string{filepath.Join(target, "sub"), filepath.Join(ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "elsewhere", "sub"), filepath.Join(ws, "last")); err != nil {
		t.Fatal(err)
	}
	// The planned path had a real directory "ws"; now "ws" is a link.
	if err := os.Rename(ws, ws+".orig"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, ws); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, wantErr string
	}{
		{"symlink-in-path", filepath.Join(ws, "sub"), "symlink"},
		{"symlink-last-component-skipped", filepath.Join(ws+".orig", "last"), ""},
		{"real-directory", filepath.Join(ws+".orig", "sub"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := &launcher.Ruleset{ABI: abi, HandledFS: handledFS(abi), Rules: []launcher.Rule{{Path: tc.path, Access: handledFS(abi)}}}
			p, err := rs.Prepare()
			if p != nil {
				defer p.Close()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Prepare: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Prepare: %v, want an error mentioning %q", err, tc.wantErr)
			}
		})
	}
}
