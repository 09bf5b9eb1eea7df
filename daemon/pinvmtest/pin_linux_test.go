//go:build linux

package pinvmtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/daemon"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/session"
)

// The test binary's helper processes (testutil.RunOp): "daemon JSON" is a
// daemon configured by the JSON daemonOpts, stopped gracefully by SIGTERM;
// "fsop PATH" writes one file and prints OK or the errno name (scripts in a
// session run it as "$SELF" fsopVerb PATH).
var (
	ops = map[string]testutil.Op{
		"daemon": func(a []string) int { return daemonMain(a[0]) },
		"fsop":   func(a []string) int { return fsop(a[0]) },
	}
	fsopVerb = testutil.OpArgs("fsop")[0]
)

type daemonOpts struct {
	Socket, ManagedDir, AuditPath, StateDir, PinDir, Parent, RegistryDir string
}

func TestMain(m *testing.M) {
	testutil.RunOp(ops)
	os.Exit(m.Run())
}

func fsop(path string) int {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err == nil {
		_, err = unix.Write(fd, []byte("written in the session\n"))
		unix.Close(fd)
	}
	return testutil.ReportErrnoName(err)
}

func daemonMain(v string) int {
	var o daemonOpts
	if err := json.Unmarshal([]byte(v), &o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	self, _ := os.Executable()
	srv, err := daemon.New(daemon.Options{Socket: o.Socket, ManagedDir: o.ManagedDir, AuditPath: o.AuditPath,
		StateDir: o.StateDir, PinDir: o.PinDir, Cgroup: cgroup.Config{Parent: o.Parent},
		Registry: session.Registry{Dir: o.RegistryDir}, SelfExe: self})
	if err == nil {
		err = srv.Serve(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type syncBuffer = testutil.SyncBuffer

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

type world struct {
	base, ws, outside string
	opts              daemonOpts
	cfg               cgroup.Config
}

func newWorld(t *testing.T) *world {
	t.Helper()
	testutil.RequireRoot(t)
	if err := loader.ProbeBPFLSM(); err != nil {
		testutil.SkipUnlessVM(t, "BPF-LSM not usable: %v", err)
	}
	base := testutil.TmpfsBase(t, "oxs-pinvm-")
	w := &world{base: base, ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{w.ws, w.outside, filepath.Join(base, "managed")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pinDir := filepath.Join(loader.BPFFSMount, "oxs-pinvm-"+randHex(4))
	if err := loader.EnsurePinDir(pinDir); err != nil {
		testutil.SkipUnlessVM(t, "no bpffs for pins: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(pinDir) })
	w.opts = daemonOpts{Socket: filepath.Join(base, "run", "api.sock"), ManagedDir: filepath.Join(base, "managed"),
		AuditPath: filepath.Join(base, "audit.jsonl"), StateDir: filepath.Join(base, "state"), PinDir: pinDir,
		Parent: "oxs-pinvm-" + randHex(4), RegistryDir: filepath.Join(base, "registry")}
	w.cfg = cgroup.Config{Parent: w.opts.Parent}
	t.Cleanup(func() {
		ids, _ := cgroup.ListSessions(w.cfg)
		for _, id := range ids {
			session.Stop(context.Background(), w.cfg, session.Registry{Dir: w.opts.RegistryDir}, id)
		}
		if mnt, err := cgroup.Cgroup2Mount(); err == nil {
			os.Remove(filepath.Join(mnt, w.opts.Parent))
		}
	})
	return w
}

// startDaemon runs a daemon process and waits until it answers.
func (w *world) startDaemon(t *testing.T) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	o, _ := json.Marshal(w.opts)
	self, _ := os.Executable()
	cmd := exec.Command(self, testutil.OpArgs("daemon", string(o))...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("daemon log:\n%s", out.String())
		}
	})
	for deadline := time.Now().Add(120 * time.Second); !daemon.Available(w.opts.Socket); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon not answering:\n%s", out.String())
		}
	}
	return cmd, out
}

// fsSessions returns the pinned fs generations and the session cgroup ids
// in the newest one's map.
func (w *world) fsSessions(t *testing.T) ([]loader.Generation, []uint64) {
	t.Helper()
	gens, err := loader.PinSet{Dir: filepath.Join(w.opts.PinDir, "fs")}.Generations()
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) == 0 {
		return nil, nil
	}
	keys, err := gens[len(gens)-1].SessionKeys("fs_sessions")
	if err != nil {
		t.Fatal(err)
	}
	return gens, keys
}

// denials returns the BPF-LSM denial records of session id for path.
func denials(t *testing.T, auditPath, id, path string) int {
	t.Helper()
	f, err := os.Open(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r audit.Record
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			t.Fatalf("bad audit line %q", sc.Text())
		}
		if r.Ox.Kind == audit.KindDenial && r.Ox.Session == id && r.Ox.Layer == audit.LayerBPFLSM && r.File != nil && r.File.Path == path {
			n++
		}
	}
	return n
}

// An attach session through the daemon with filesystem rules: BPF-LSM
// refuses a write outside the workspace (EACCES, no file, an audit
// record); after kill -9 of the daemon the pinned programs still refuse
// it; a new daemon adopts the session into its own generation, retires
// the old one and audits refusals again; stopping the session removes its
// entries, and a graceful stop with no session left removes the pins.
func TestDaemonKill9KeepsPinnedFSRules(t *testing.T) {
	w := newWorld(t)
	rootHomeOffOverlay(t)
	d1, log1 := w.startDaemon(t)
	if !testutil.LineHasAll(log1.String(), `"layer":"bpf-lsm"`, `"message":"layer pinned"`) {
		t.Fatalf("the daemon did not build and pin its BPF-LSM layer:\n%s", log1.String())
	}
	self, _ := os.Executable()
	const rounds = 3
	var script strings.Builder
	for i := 1; i <= rounds; i++ {
		n := fmt.Sprint(i)
		script.WriteString("while [ ! -e go" + n + " ]; do sleep 0.05; done; \"$SELF\" " + fsopVerb + " ok" + n + ".txt > okres" + n +
			"; \"$SELF\" " + fsopVerb + " \"$OUT/r" + n + ".txt\" > res" + n + "; ")
	}
	script.WriteString("sleep 600")
	target := exec.Command("sh", "-c", script.String())
	target.Dir = w.ws
	target.Env = []string{"PATH=/usr/bin:/bin", "SELF=" + self, "OUT=" + w.outside}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Process.Kill(); target.Wait() })
	// Root keeps the audit path its policy names (the daemon overrides
	// it for other users only): name the test's log.
	config := filepath.Join(w.base, "config.toml")
	if err := os.WriteFile(config, []byte("[audit]\npath = \""+w.opts.AuditPath+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &daemon.Client{Socket: w.opts.Socket}
	ar, err := c.Attach(t.Context(), daemon.AttachRequest{PID: target.Process.Pid, Dir: w.ws,
		Policy: daemon.PolicyFlags{Workspace: w.ws, Net: "full", ConfigFile: config}})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	id := ar.Session.ID
	g, err := cgroup.OpenSession(w.cfg, id)
	if err != nil {
		t.Fatal(err)
	}
	round := func(n int) {
		t.Helper()
		ns := fmt.Sprint(n)
		if err := os.WriteFile(filepath.Join(w.ws, "go"+ns), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		res := filepath.Join(w.ws, "res"+ns)
		var got string
		for deadline := time.Now().Add(60 * time.Second); !strings.HasSuffix(got, "\n"); time.Sleep(50 * time.Millisecond) {
			b, _ := os.ReadFile(res)
			got = string(b)
			if time.Now().After(deadline) {
				t.Fatalf("round %d did not finish (%q)", n, got)
			}
		}
		if got != "EACCES\n" {
			t.Fatalf("round %d: write outside the workspace from inside the session: %q, want EACCES", n, got)
		}
		// Normal work goes on: a write inside the workspace succeeds.
		if b, _ := os.ReadFile(filepath.Join(w.ws, "okres"+ns)); string(b) != "OK\n" {
			t.Fatalf("round %d: write inside the workspace: %q, want OK", n, b)
		}
		if b, err := os.ReadFile(filepath.Join(w.ws, "ok"+ns+".txt")); err != nil || !strings.Contains(string(b), "written in the session") {
			t.Fatalf("round %d: the file written inside the workspace: %q %v", n, b, err)
		}
		if _, err := os.Lstat(filepath.Join(w.outside, "r"+ns+".txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("round %d: the refused file exists (%v)", n, err)
		}
	}
	waitDenial := func(path string, atLeast int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); denials(t, w.opts.AuditPath, id, path) < atLeast; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(w.opts.AuditPath)
				t.Fatalf("no BPF-LSM denial record of session %s for %s; audit log:\n%s", id, path, b)
			}
		}
	}

	round(1)
	waitDenial(filepath.Join(w.outside, "r1.txt"), 1)

	d1.Process.Signal(syscall.SIGKILL)
	d1.Wait()
	gens, keys := w.fsSessions(t)
	if len(gens) != 1 || !slices.Contains(keys, g.CgroupID) {
		t.Fatalf("after kill -9: fs generations %+v with sessions %v, want one holding cgroup %d", gens, keys, g.CgroupID)
	}
	// No daemon runs: only the pinned programs can refuse.
	round(2)

	d2, log2 := w.startDaemon(t)
	// The socket answers before adoption is done: wait for its lines.
	for _, want := range []string{"session " + id + ": layers applied again", "retired generation " + gens[0].Dir} {
		for deadline := time.Now().Add(60 * time.Second); !strings.Contains(log2.String(), want); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("restarted daemon log lacks %q:\n%s", want, log2.String())
			}
		}
	}
	gens2, keys2 := w.fsSessions(t)
	if len(gens2) != 1 || gens2[0].N != gens[0].N+1 || !slices.Contains(keys2, g.CgroupID) {
		t.Fatalf("after adoption: fs generations %+v with sessions %v, want only generation %d holding cgroup %d", gens2, keys2, gens[0].N+1, g.CgroupID)
	}
	round(3)
	waitDenial(filepath.Join(w.outside, "r3.txt"), 1)
	if n := unaudited(t, w.opts.AuditPath); n < 1 {
		t.Errorf("no events_lost record counts the refusal enforced while no daemon ran")
	}

	if err := c.Stop(t.Context(), id); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, keys := w.fsSessions(t); !slices.Contains(keys, g.CgroupID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stopped session's entry (cgroup %d) still pinned", g.CgroupID)
		}
	}
	d2.Process.Signal(syscall.SIGTERM)
	if err := d2.Wait(); err != nil {
		t.Fatalf("daemon after SIGTERM: %v\n%s", err, log2.String())
	}
	if _, err := os.Stat(w.opts.PinDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("graceful stop with no session left kept the pin directory (%v)", err)
	}
}

// unaudited sums the BPF-LSM events_lost records.
func unaudited(t *testing.T, auditPath string) uint64 {
	t.Helper()
	b, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, line := range bytes.Split(b, []byte("\n")) {
		var r audit.Record
		if len(line) == 0 || json.Unmarshal(line, &r) != nil {
			continue
		}
		if r.Ox.Kind == audit.KindEventsLost && r.Ox.Layer == audit.LayerBPFLSM {
			n += r.Ox.EventsLost
		}
	}
	return n
}

// rootHomeOffOverlay gives root a home on tmpfs when its home is on
// overlayfs (the test VM's root): the daemon compiles root's policy, whose
// deny-read anchors below the home would make the BPF-LSM layer refuse the
// session (fsguard.ErrOverlay), which is not what this test is about.
func rootHomeOffOverlay(t *testing.T) {
	t.Helper()
	u, err := user.LookupId("0")
	if err != nil {
		t.Fatal(err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(u.HomeDir, &sfs); err != nil || sfs.Type != unix.OVERLAYFS_SUPER_MAGIC {
		return
	}
	if err := unix.Mount("tmpfs", u.HomeDir, "tmpfs", 0, "mode=0700"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", u.HomeDir, err)
	}
	t.Cleanup(func() { unix.Unmount(u.HomeDir, unix.MNT_DETACH) })
}
