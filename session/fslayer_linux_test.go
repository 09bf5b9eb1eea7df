//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/landlock"
	"github.com/openoxide/oxsupervise/policy"
)

// gatedLayer stands in for BPF-LSM at run's exec gate: it records what
// the session group held when it was applied.
type gatedLayer struct {
	fail     error
	pids     []string
	exe      string
	roSys    bool
	tornDown bool
}

func (g *gatedLayer) Name() string         { return "fake-gated" }
func (g *gatedLayer) activatesBeforeExec() {}

func (g *gatedLayer) Apply(ctx context.Context, s SessionInfo) (func(context.Context) error, error) {
	b, err := os.ReadFile(filepath.Join(s.CgroupPath, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	g.pids = strings.Fields(string(b))
	if len(g.pids) == 1 {
		g.exe, _ = os.Readlink("/proc/" + g.pids[0] + "/exe")
		mi, _ := os.ReadFile("/proc/" + g.pids[0] + "/mountinfo")
		for _, line := range strings.Split(string(mi), "\n") {
			f := strings.Fields(line)
			if len(f) > 5 && f[4] == "/proc/sys" && strings.HasPrefix(f[5], "ro") {
				g.roSys = true
			}
		}
	}
	if g.fail != nil {
		return nil, g.fail
	}
	return func(context.Context) error { g.tornDown = true; return nil }, nil
}

// TestRunExecGate proves run applies an exec-gated layer (BPF-LSM, which
// refuses mounts) after the launcher built its mount namespace and before
// it execs the command, and that a gated layer that fails stops the
// command from ever running.
func TestRunExecGate(t *testing.T) {
	c, ws, self, reg := gateTestSession(t, "oxs-gate-")
	marker := filepath.Join(ws, "marker")
	run := func(l SessionLayer) (int, error) {
		return Run(context.Background(), RunOptions{
			Policy: c, Argv: []string{"touch", marker}, Env: []string{"PATH=/usr/bin:/bin"},
			Dir: ws, SelfExe: self, Registry: reg, Layers: []SessionLayer{l},
		})
	}

	ok := &gatedLayer{}
	if code, err := run(ok); err != nil || code != 0 {
		t.Fatalf("Run: exit %d, %v", code, err)
	}
	if len(ok.pids) != 1 {
		t.Fatalf("session group held %v when the gated layer was applied, want the launcher alone", ok.pids)
	}
	if ok.exe != self {
		t.Errorf("process in the group at the gate runs %q, want the launcher %q (not yet exec'd)", ok.exe, self)
	}
	if !ok.roSys {
		t.Error("the launcher had not built its mount namespace (read-only /proc/sys) at the gate")
	}
	if !ok.tornDown {
		t.Error("gated layer not torn down after the session")
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("command did not run after the gate opened: %v", err)
	}
	os.Remove(marker)

	failing := &gatedLayer{fail: errors.New("refused at the gate")}
	_, err := run(failing)
	var be *BoundaryError
	if !errors.As(err, &be) || be.Layer != "fake-gated" {
		t.Fatalf("Run with a failing gated layer: %v, want a BoundaryError naming fake-gated", err)
	}
	if failing.pids == nil {
		t.Fatal("the failing gated layer was never asked")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran although the gated layer failed: %v", err)
	}
	if entries, _ := os.ReadDir(reg.Dir); len(entries) != 0 {
		t.Errorf("registry entries left behind: %v", entries)
	}
}

func TestFSRecord(t *testing.T) {
	now := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	proc := fsguard.Event{CgroupID: 7, PID: 42, TID: 43, PPID: 40, UID: 1000, Comm: "sh", Errno: syscall.EACCES}
	with := func(f func(*fsguard.Event)) fsguard.Event { e := proc; f(&e); return e }
	tests := []struct {
		name       string
		ev         fsguard.Event
		action     string
		class      audit.Class
		file       *audit.File
		errnoName  string
		msgContain string
	}{
		{"write outside", with(func(e *fsguard.Event) {
			e.Op, e.Kind, e.Path, e.Dev, e.Ino, e.Rule = fsguard.OpOpenWrite, fsguard.KindOutside, "/etc/passwd", unix.Mkdev(254, 1), 1311, "no writable root above the entry"
		}), "open", audit.ClassFile, &audit.File{Path: "/etc/passwd", Device: "254:1", Inode: 1311}, "EACCES", "/etc/passwd"},
		{"first-time protected name", with(func(e *fsguard.Event) {
			e.Op, e.Kind, e.Path, e.Dev, e.NewEntry, e.Rule = fsguard.OpMkdir, fsguard.KindPattern, "/w/.codex", unix.Mkdev(8, 2), true, "protected pattern .codex (default)"
		}), "mkdir", audit.ClassFile, &audit.File{Path: "/w/.codex", Device: "8:2"}, "EACCES", "protected pattern"},
		{"rename target", with(func(e *fsguard.Event) {
			e.Op, e.Kind, e.Path, e.Dev, e.Ino = fsguard.OpRenameTarget, fsguard.KindProtected, "/w/.git/hooks", unix.Mkdev(8, 2), 9
		}), "rename", audit.ClassFile, &audit.File{Path: "/w/.git/hooks", Device: "8:2", Inode: 9}, "EACCES", "rename_target"},
		{"kill outside", with(func(e *fsguard.Event) {
			e.Op, e.Kind, e.TargetPID, e.Errno, e.Rule = fsguard.OpKill, fsguard.KindSelf, 1, syscall.EPERM, "self-protection: a session may not reach outside itself"
		}), "kill", audit.ClassSelfProtection, nil, "EPERM", "pid 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fsRecord(tt.ev, "s-1", "workspace-write", now)
			r.Normalize()
			if err := r.Validate(); err != nil {
				t.Fatalf("record does not validate: %v", err)
			}
			if r.Event.Action != tt.action || r.Ox.Class != tt.class || r.Ox.Layer != audit.LayerBPFLSM {
				t.Errorf("action %q class %q layer %q, want %q %q bpf-lsm", r.Event.Action, r.Ox.Class, r.Ox.Layer, tt.action, tt.class)
			}
			if r.Ox.Session != "s-1" || r.Ox.Mode != "workspace-write" || r.Ox.Kind != audit.KindDenial || r.Ox.Rule != tt.ev.Rule {
				t.Errorf("ox %+v", r.Ox)
			}
			if r.Error == nil || r.Error.Code != tt.errnoName || r.Ox.Errno != int(tt.ev.Errno) {
				t.Errorf("error %+v errno %d, want %s", r.Error, r.Ox.Errno, tt.errnoName)
			}
			if fmt.Sprint(r.File) != fmt.Sprint(tt.file) {
				t.Errorf("file %+v, want %+v", r.File, tt.file)
			}
			if r.Process == nil || r.Process.PID != 42 || r.Process.Name != "sh" || r.Process.Thread.ID != 43 || r.Process.Parent == nil || r.Process.Parent.PID != 40 || r.User.ID != "1000" {
				t.Errorf("process %+v user %+v", r.Process, r.User)
			}
			if !strings.Contains(r.Message, tt.msgContain) {
				t.Errorf("message %q lacks %q", r.Message, tt.msgContain)
			}
		})
	}
}

// The records a BPF layer writes about its own accounting validate as the
// schema says, for both layers.
func TestKernelEventsAccountingRecords(t *testing.T) {
	for _, k := range []*kernelEvents{
		{layer: audit.LayerBPFLSM, what: "filesystem"},
		{layer: audit.LayerCgroupNet, what: "network"},
	} {
		lost := k.lostRecord(12, "the kernel ring buffer was full")
		lost.Normalize()
		if err := lost.Validate(); err != nil || lost.Ox.EventsLost != 12 || lost.Ox.Layer != k.layer || !strings.Contains(lost.Message, k.what) {
			t.Errorf("%s events_lost record %+v (%q): %v", k.what, lost.Ox, lost.Message, err)
		}
		sup := k.suppressedRecord("s-1", 7)
		sup.Normalize()
		if err := sup.Validate(); err != nil || sup.Ox.Suppressed != 7 || sup.Ox.Session != "s-1" || sup.Ox.Layer != k.layer {
			t.Errorf("%s suppressed record %+v: %v", k.what, sup.Ox, err)
		}
	}
}

// gateTestSession is the workspace-write policy of the exec gate tests: a
// workspace of its own under /var/tmp (removed when t ends), its audit log
// and registry beside it, and this test binary as the launcher. It skips
// without root or Landlock.
func gateTestSession(t *testing.T, prefix string) (c *policy.Compiled, ws, self string, reg Registry) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: run creates cgroups and mount namespaces")
	}
	if _, err := landlock.ABI(); err != nil {
		t.Skipf("SKIPPED, NOT PASSED: landlock unavailable (%v): run needs a filesystem layer", err)
	}
	base, err := os.MkdirTemp("/var/tmp", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	ws = filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(ws, &st); err != nil {
		t.Fatal(err)
	}
	wsAnchor := policy.Anchor{Path: ws, Dev: st.Dev, Ino: st.Ino, Dir: true, Exists: true}
	c = &policy.Compiled{
		SchemaVersion: policy.CompiledSchemaVersion, Mode: policy.ModeWorkspaceWrite, FilesystemRules: true,
		ReadAccess: policy.ReadAccessFull, Workspace: wsAnchor, WritableRoots: []policy.Anchor{wsAnchor},
		Audit: policy.Audit{Path: filepath.Join(base, "audit.jsonl")},
	}
	if self, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	return c, ws, self, Registry{Dir: filepath.Join(base, "registry")}
}
