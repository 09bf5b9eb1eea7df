//go:build linux

package session_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/session"
)

// pinnedPrograms returns the program ids of the links pinned in set.
func pinnedPrograms(t *testing.T, set string) []ebpf.ProgramID {
	t.Helper()
	ids, err := loader.Generation{Dir: set}.ProgramIDs()
	if err != nil || len(ids) == 0 {
		t.Fatalf("pinned programs of %s: %v (%v)", set, ids, err)
	}
	return ids
}

// A standalone run leaves its network programs pinned, and the next run
// reuses them instead of loading them again: the second run's session is
// in the pinned programs' session map while it runs, and the pinned links
// still hold the very programs (by kernel id) the first run loaded.
func TestStandaloneRunReusesPinnedPrograms(t *testing.T) {
	requireNetLayer(t)
	e := newEnv(t)
	pins, pinEnv := pinDir(t)

	pinned := firstPinnedRun(t, e, pins, pinEnv, "net-*", "run", "--net", "none", "--", "true")
	// The set is named after the parent the programs are attached on.
	parent, err := cgroup.ParentDir(cgroup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(parent, &st); err != nil {
		t.Fatal(err)
	}
	if want := "net-" + strconv.FormatUint(st.Ino, 10); filepath.Base(pinned) != want {
		t.Fatalf("pinned set %s, want %s (the sessions' parent %s)", pinned, want, parent)
	}
	first := pinnedPrograms(t, pinned)
	if keys, err := (loader.Generation{Dir: pinned}).SessionKeys("net_sessions"); err != nil || len(keys) != 0 {
		t.Fatalf("the first run left sessions in the pinned map: %v (%v)", keys, err)
	}

	// The second run's command reports its session and waits on a fifo,
	// so the pinned map can be read while the session lives.
	fifo := filepath.Join(e.ws, "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(e.ws, "session-id")
	done := make(chan result, 1)
	go func() {
		done <- e.run(t, pinEnv, "run", "--net", "none", "--", "sh", "-c", `echo "$OXSUPERVISE_SESSION" > session-id; read x < gate`)
	}()
	gate, err := os.OpenFile(fifo, os.O_WRONLY, 0) // returns once the command reads
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(idFile)
	if err != nil {
		gate.Close()
		t.Fatal(err)
	}
	g, err := cgroup.OpenSession(cgroup.Config{}, strings.TrimSpace(string(b)))
	if err != nil {
		gate.Close()
		t.Fatal(err)
	}
	keys, err := loader.Generation{Dir: pinned}.SessionKeys("net_sessions")
	gate.Write([]byte("go\n"))
	gate.Close()
	r := <-done
	if r.code != 0 {
		t.Fatalf("second run: exit %d\n%s", r.code, r.stderr)
	}
	if err != nil || !slices.Contains(keys, g.CgroupID) {
		t.Fatalf("second run's session (cgroup %d) not in the pinned programs' session map: %v (%v); it loaded programs of its own", g.CgroupID, keys, err)
	}
	if again := pinnedPrograms(t, pinned); !slices.Equal(again, first) {
		t.Fatalf("pinned programs %v after the second run, want the first run's %v", again, first)
	}
	if keys, err := (loader.Generation{Dir: pinned}).SessionKeys("net_sessions"); err != nil || len(keys) != 0 {
		t.Fatalf("the second run left its session in the pinned map: %v (%v)", keys, err)
	}
}

// A standalone run leaves the read-only view's audit program pinned,
// unattached, and the next run opens it instead of loading and verifying
// it again: the pinned program (by kernel id) is the first run's after the
// second, the second run's EROFS refusal is still audited exactly once,
// and neither run leaves a session in the pinned session table.
func TestStandaloneRunReusesPinnedReadOnlyViewAudit(t *testing.T) {
	requireNetLayer(t)
	e := newEnv(t)
	pins, pinEnv := pinDir(t)

	pinned := firstPinnedRun(t, e, pins, pinEnv, "roview", "run", "--", "true")
	progID := func() ebpf.ProgramID { return pinnedROViewProgID(t, pinned) }
	first := progID()

	victim := filepath.Join(e.outside, "reuse-created.txt")
	r := e.run(t, pinEnv, "run", "--", "sh", "-c", `"$FSOP" write `+victim)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "EROFS" {
		t.Fatalf("second run: exit %d, stdout %q, want EROFS from the write of %s\n%s", r.code, r.stdout, victim, r.stderr)
	}
	if _, err := os.Lstat(victim); !os.IsNotExist(err) {
		t.Fatalf("%s exists after the refused write (%v)", victim, err)
	}
	if again := progID(); again != first {
		t.Fatalf("pinned read-only view program %d after the second run, want the first run's %d: it loaded one of its own", again, first)
	}
	if keys, err := (loader.Generation{Dir: pinned}).SessionKeys("roview_sessions"); err != nil || len(keys) != 0 {
		t.Fatalf("a run left its session in the pinned read-only view table: %v (%v)", keys, err)
	}
	b, err := os.ReadFile(filepath.Join(e.base, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(line, `"layer":"read-only-view"`) && strings.Contains(line, victim) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d read-only-view records of %s, want 1; log:\n%s", n, victim, b)
	}
}

// A pinned network set is reused only as it was pinned (its record, not
// the object file, is what a reopen checks): with its record removed, or
// with another map of the same shape pinned over one of its maps, the
// next run does not reuse it but loads programs of its own, and pins them
// in its place.
func TestStandaloneRunDoesNotReuseTamperedPins(t *testing.T) {
	requireNetLayer(t)
	tests := []struct {
		name   string
		tamper func(t *testing.T, set string)
	}{
		{"record removed", func(t *testing.T, set string) {
			records, _ := filepath.Glob(filepath.Join(set, "record-*"))
			if len(records) != 1 {
				t.Fatalf("records in %s: %v, want one", set, records)
			}
			if err := os.Remove(records[0]); err != nil {
				t.Fatal(err)
			}
		}},
		{"map pinned over", func(t *testing.T, set string) {
			pinMapLikeOver(t, filepath.Join(set, "maps", "net_sessions"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			pins, pinEnv := pinDir(t)
			pinned := firstPinnedRun(t, e, pins, pinEnv, "net-*", "run", "--net", "none", "--", "true")
			first := pinnedPrograms(t, pinned)
			tt.tamper(t, pinned)
			if r := e.run(t, pinEnv, "run", "--net", "none", "--", "true"); r.code != 0 {
				t.Fatalf("second run: exit %d\n%s", r.code, r.stderr)
			}
			again := pinnedPrograms(t, pinned)
			if slices.Equal(again, first) {
				t.Fatalf("pinned programs %v after the second run are the first run's: the tampered set was reused", again)
			}
			if records, _ := filepath.Glob(filepath.Join(pinned, "record-*")); len(records) != 1 {
				t.Fatalf("records after the second run pinned its own programs: %v, want one", records)
			}
		})
	}
}

// The shared event maps and the read-only view's set are reused only as
// they were pinned, like the network set (their records, not the object
// file, are what a reopen checks): with a record removed, another program
// pinned over the read-only view's, or another ring buffer pinned over the
// event maps', the next run loads a read-only view program of its own and
// pins it in its place, with a record of its own.
func TestStandaloneRunDoesNotReuseTamperedReadOnlyViewPins(t *testing.T) {
	requireNetLayer(t)
	pinOver := func(t *testing.T, path string, pin func(string) error) {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := pin(path); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		tamper func(t *testing.T, version string)
	}{
		{"read-only view record removed", func(t *testing.T, version string) {
			records, _ := filepath.Glob(filepath.Join(version, "roview", "record-*"))
			if len(records) != 1 {
				t.Fatalf("records of the read-only view set: %v, want one", records)
			}
			if err := os.Remove(records[0]); err != nil {
				t.Fatal(err)
			}
		}},
		{"event maps record removed", func(t *testing.T, version string) {
			records, _ := filepath.Glob(filepath.Join(version, "events", "record-*"))
			if len(records) != 1 {
				t.Fatalf("records of the event maps: %v, want one", records)
			}
			if err := os.Remove(records[0]); err != nil {
				t.Fatal(err)
			}
		}},
		{"program pinned over", func(t *testing.T, version string) {
			prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
				Type: ebpf.RawTracepoint, License: "GPL",
				Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			pinOver(t, filepath.Join(version, "roview", "progs", "roview_sys_exit"), prog.Pin)
		}},
		{"ring buffer pinned over", func(t *testing.T, version string) {
			pinMapLikeOver(t, filepath.Join(version, "events", "maps", "oxs_events"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			pins, pinEnv := pinDir(t)
			version := firstPinnedRun(t, e, pins, pinEnv, "", "run", "--", "true")
			progID := func() ebpf.ProgramID { return pinnedROViewProgID(t, filepath.Join(version, "roview")) }
			first := progID()
			tt.tamper(t, version)
			tampered := progID()
			if r := e.run(t, pinEnv, "run", "--", "true"); r.code != 0 {
				t.Fatalf("second run: exit %d\n%s", r.code, r.stderr)
			}
			if again := progID(); again == first || again == tampered {
				t.Fatalf("pinned read-only view program %d after the second run (first run's %d, tampered %d): the tampered pins were reused", again, first, tampered)
			}
			for _, set := range []string{"roview", "events"} {
				if records, _ := filepath.Glob(filepath.Join(version, set, "record-*")); len(records) != 1 {
					t.Fatalf("records of %s after the second run pinned its own: %v, want one", set, records)
				}
			}
		})
	}
}

// pinnedROViewProgID is the kernel id of the read-only view program
// pinned in set, which tells a reopened pin from a reload.
func pinnedROViewProgID(t *testing.T, set string) ebpf.ProgramID {
	t.Helper()
	p, err := ebpf.LoadPinnedProgram(filepath.Join(set, "progs", "roview_sys_exit"), nil)
	if err != nil {
		t.Fatalf("pinned read-only view program: %v", err)
	}
	defer p.Close()
	return testutil.ProgramID(t, p)
}

// pinMapLikeOver replaces the map pinned at path with a new, empty map of
// the same shape: a pin a reuse must not take for its own.
func pinMapLikeOver(t *testing.T, path string) {
	t.Helper()
	old, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := &ebpf.MapSpec{Type: old.Type(), KeySize: old.KeySize(), ValueSize: old.ValueSize(), MaxEntries: old.MaxEntries(), Flags: old.Flags()}
	old.Close()
	m, err := ebpf.NewMap(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := m.Pin(path); err != nil {
		t.Fatal(err)
	}
}

// A standalone run leaves its end's releases to its exit where the pins
// keep the objects anyway (host.CloseForExit), and still nothing of the
// session outlives it: after each of several runs, its group, its
// registry entry and its entries in the pinned session maps are gone, the
// read-only view's program is attached nowhere, the log ends the session
// with session_stop, the pins' lease is free, and the next run opens the
// very programs (by kernel id) the first one pinned.
func TestStandaloneRunLeavesNothingButItsPins(t *testing.T) {
	requireNetLayer(t)
	e := newEnv(t)
	pins, pinEnv := pinDir(t)
	var netProgs []ebpf.ProgramID
	var roviewProg ebpf.ProgramID
	for round := range 3 {
		r := e.run(t, pinEnv, "run", "--", "sh", "-c", `echo "$OXSUPERVISE_SESSION"`)
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || !strings.HasPrefix(id, "s-") {
			t.Fatalf("round %d: exit %d, stdout %q\n%s", round, r.code, r.stdout, r.stderr)
		}
		if _, err := cgroup.OpenSession(cgroup.Config{}, id); err == nil || !strings.Contains(err.Error(), "no such session") {
			t.Fatalf("round %d: the group of %s after the run: %v, want none", round, id, err)
		}
		if entry, err := (session.Registry{}).Get(id); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("round %d: registry entry of %s after the run: %+v (%v), want none", round, id, entry, err)
		}
		dirs, _ := filepath.Glob(filepath.Join(pins, "run", loader.ObjectsVersion()+"-ring*"))
		if len(dirs) != 1 {
			t.Fatalf("round %d: pin directories %v, want one below %s/run", round, dirs, pins)
		}
		netSets, _ := filepath.Glob(filepath.Join(dirs[0], "net-*"))
		if len(netSets) != 1 {
			t.Fatalf("round %d: pinned network sets %v, want one", round, netSets)
		}
		roview := filepath.Join(dirs[0], "roview")
		for set, m := range map[string]string{netSets[0]: "net_sessions", roview: "roview_sessions"} {
			if keys, err := (loader.Generation{Dir: set}).SessionKeys(m); err != nil || len(keys) != 0 {
				t.Fatalf("round %d: the run left sessions in %s/%s: %v (%v)", round, set, m, keys, err)
			}
		}
		progs, prog := pinnedPrograms(t, netSets[0]), pinnedROViewProgID(t, roview)
		if round == 0 {
			netProgs, roviewProg = progs, prog
		} else if !slices.Equal(progs, netProgs) || prog != roviewProg {
			t.Fatalf("round %d: pinned programs %v and %d, want the first run's %v and %d: the pins were not reused",
				round, progs, prog, netProgs, roviewProg)
		}
		if attached := testutil.LinksOf(t, prog); len(attached) != 0 {
			t.Fatalf("round %d: the read-only view's program %d is still attached (links %v) after the run", round, prog, attached)
		}
		lease, err := os.Open(dirs[0])
		if err != nil {
			t.Fatal(err)
		}
		err = unix.Flock(int(lease.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		lease.Close()
		if err != nil {
			t.Fatalf("round %d: the pins' lease after the run: %v, want it free", round, err)
		}
		var kinds []audit.Kind
		for _, rec := range readAudit(t, filepath.Join(e.base, "audit.jsonl")) {
			if rec.Ox.Session == id {
				kinds = append(kinds, rec.Ox.Kind)
			}
		}
		if len(kinds) == 0 || kinds[0] != audit.KindSessionStart || kinds[len(kinds)-1] != audit.KindSessionStop {
			t.Fatalf("round %d: session %s's records %v, want session_start first and session_stop last", round, id, kinds)
		}
	}
}

// pinDir makes a directory on bpffs for a test's runs to pin in, removed
// when the test ends, and the environment that points them at it. Where
// there is no bpffs the test is skipped, loudly: not SkipUnlessVM, which
// would put all of package session into the VM pass (the Makefile selects
// packages by it); the VM's own reuse test is session/fsvmtest's.
func pinDir(t *testing.T) (string, []string) {
	t.Helper()
	pins, err := os.MkdirTemp(loader.BPFFSMount, "oxs-reuse-test-")
	if err != nil {
		t.Skipf("SKIPPED, NOT PASSED: no bpffs at %s to pin in: %v", loader.BPFFSMount, err)
	}
	t.Cleanup(func() { os.RemoveAll(pins) })
	return pins, []string{"OXSUPERVISE_PIN_DIR=" + pins}
}

// firstPinnedRun runs `oxsupervise args...` pinning in pins and returns
// the one directory it pinned that matches sub below this build's
// objects' version (pins/run/VERSION-ring*/sub; "" for that directory
// itself); none or several fail the test.
func firstPinnedRun(t *testing.T, e *env, pins string, pinEnv []string, sub string, args ...string) string {
	t.Helper()
	if r := e.run(t, pinEnv, args...); r.code != 0 {
		t.Fatalf("first run: exit %d\n%s", r.code, r.stderr)
	}
	pattern := filepath.Join(pins, "run", loader.ObjectsVersion()+"-ring*", sub)
	got, _ := filepath.Glob(pattern)
	if len(got) != 1 {
		t.Fatalf("pinned after the first run: %v, want one match of %s", got, pattern)
	}
	return got[0]
}
