//go:build linux

package daemon

import (
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/procfs"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
)

// startDaemonProcess runs the daemon as a separate process (this test
// binary in daemon mode), so that it can be killed with SIGKILL.
func (w *world) startDaemonProcess(t *testing.T) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	o, _ := json.Marshal(daemonProcOpts{Socket: w.socket, ManagedDir: w.opts.ManagedDir, AuditPath: w.audit,
		StateDir: w.opts.StateDir, PinDir: w.opts.PinDir, Parent: w.opts.Cgroup.Parent, RegistryDir: w.opts.Registry.Dir})
	cmd := exec.Command(helper, clientArgs("daemon")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", daemonOptsEnv + "=" + string(o)}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(60 * time.Second); !Available(w.socket); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon process not answering:\n%s", out.String())
		}
	}
	return cmd, out
}

// kill -9 of the daemon: an attached process stays in its session (the
// cgroup, and every pinned layer, do not depend on the daemon), a run
// session's command dies with its supervisor instead of running on
// unsupervised, its client reports the loss; a new daemon adopts the
// attach session for its owner and stops what is left of the run session.
func TestDaemonKill9AndRestart(t *testing.T) {
	w := newWorld(t)
	d1, _ := w.startDaemonProcess(t)

	sleeper := execCommand("sleep", "60")
	sleeper.SysProcAttr.Credential = credentialFor(nobody)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	res := w.runHelper(t, nobody, w.ws, nil, "attach", itoa(sleeper.Process.Pid))
	if res.code != 0 {
		t.Fatalf("attach: %d %s", res.code, res.stderr)
	}
	var ar AttachResult
	json.Unmarshal([]byte(res.stdout), &ar)
	attached := ar.Session.ID

	runner := exec.Command(helper, clientArgs("run", w.ws, "sh", "-c", "echo started; exec sleep 60")...)
	runner.Dir = w.ws
	runner.Env = []string{"PATH=/usr/bin:/bin", helperSocketEnv + "=" + w.socket}
	runOut := &syncBuffer{}
	runner.Stdout, runner.Stderr = runOut, runOut
	runner.SysProcAttr = &syscall.SysProcAttr{Credential: credentialFor(nobody)}
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Process.Kill(); runner.Wait() })
	var runSession string
	var runPID int
	for deadline := time.Now().Add(10 * time.Second); runPID == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run session did not start: %s", runOut.String())
		}
		ids, _ := cgroupSessions(w)
		for _, id := range ids {
			if e, err := w.opts.Registry.Get(id); err == nil && id != attached && e.PID > 0 && strings.Contains(runOut.String(), "started") {
				runSession, runPID = id, e.PID
			}
		}
	}

	d1.Process.Signal(syscall.SIGKILL)
	d1.Wait()

	err := runner.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(runOut.String(), "lost the daemon during session "+runSession) {
		t.Fatalf("run client after the daemon died: %v\n%s", err, runOut.String())
	}
	for deadline := time.Now().Add(5 * time.Second); procfs.Alive(runPID); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run session's command (pid %d) survived its supervisor", runPID)
		}
	}
	if id, in, _ := sessionOfPID(w, sleeper.Process.Pid); !in || id != attached {
		t.Fatalf("attached process left its session after the daemon died: %q %v", id, in)
	}

	_, log2 := w.startDaemonProcess(t)
	waitLog(t, log2, "session "+attached+" (uid 65534) adopted")
	ids, _ := cgroupSessions(w)
	if strings.Contains(strings.Join(ids, " "), runSession) {
		t.Fatalf("the dead run session %s was not cleaned up: %v\n%s", runSession, ids, log2.String())
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "sessions"); !strings.Contains(res.stdout, attached) {
		t.Fatalf("owner does not see the adopted session: %s %s", res.stdout, res.stderr)
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "stop", attached); res.code != 0 {
		t.Fatalf("owner cannot stop the adopted session: %s", res.stderr)
	}
	if st, err := sleeper.Process.Wait(); err != nil || st.Success() {
		t.Fatalf("stopped adopted session's process: %v %v, want killed", st, err)
	}
}

// usePinDir points w's daemons at a fresh directory on bpffs (mounted by
// the code under test when absent), removed at the end of the test.
func usePinDir(t *testing.T, w *world) {
	t.Helper()
	dir := filepath.Join(loader.BPFFSMount, "oxs-dtest-"+randHex(4))
	if err := loader.EnsurePinDir(dir); err != nil {
		t.Skipf("no bpffs for pins here: %v", err)
	}
	// Independent of the mountinfo lookup: statfs says what it is.
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil || sfs.Type != unix.BPF_FS_MAGIC {
		t.Fatalf("pin directory %s: statfs type %#x (%v), want bpffs", dir, sfs.Type, err)
	}
	w.opts.PinDir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
}

// pinnedSessions returns the generations pinned for set below w's pin
// directory and the session cgroup ids in the newest one's map.
func pinnedSessions(t *testing.T, w *world, set, sessionsMap string) ([]loader.Generation, []uint64) {
	t.Helper()
	gens, err := loader.PinSet{Dir: filepath.Join(w.opts.PinDir, set)}.Generations()
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) == 0 {
		return nil, nil
	}
	keys, err := gens[len(gens)-1].SessionKeys(sessionsMap)
	if err != nil {
		t.Fatal(err)
	}
	return gens, keys
}

// kill -9 of the daemon during an attach session with an allowlist: the
// pinned cgroup programs keep refusing (EPERM) while no daemon runs, the
// next daemon adopts the session into its own generation and retires the
// old one (refusals are audited again), stopping the session removes its
// entries, and a daemon stopping with no session left removes its pins.
func TestDaemonKill9KeepsPinnedNetworkRules(t *testing.T) {
	w := newWorld(t)
	requireSockAddr(t, w)
	usePinDir(t, w)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skipf("nsenter(1) not found (%v)", err)
	}
	d1, log1 := w.startDaemonInNetns(t, 0)
	if !testutil.LineHasAll(log1.String(), `"layer":"network"`, `"message":"layer pinned"`) {
		t.Fatalf("the daemon did not pin its network layer:\n%s", log1.String())
	}
	const rounds = 3
	var script strings.Builder
	for i := 1; i <= rounds; i++ {
		f := filepath.Join(w.ws, "go"+itoa(i))
		script.WriteString("while [ ! -e " + f + " ]; do sleep 0.05; done; " + connectScript(allowedAddr, otherAddr) + "; echo round" + itoa(i) + "; ")
	}
	script.WriteString("sleep 60")
	target := exec.Command("nsenter", "--net=/proc/"+itoa(d1.Process.Pid)+"/ns/net", "--setuid", itoa(nobody), "--setgid", itoa(nobody), "--", "sh", "-c", script.String())
	target.Dir = w.ws
	var out syncBuffer
	target.Stdout, target.Stderr = &out, &out
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Process.Kill(); target.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := procfs.ReadStatus(target.Process.Pid); err == nil && st.UID[procfs.Real] == nobody && st.UID[procfs.Effective] == nobody {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("target never ran as uid %d: %s", nobody, out.String())
		}
	}
	ar := w.attachNet(t, target.Process.Pid, "allowlist", allowedAddr)
	g, err := cgroup.OpenSession(w.opts.Cgroup, ar.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	// allowedOK is what a connect the programs allow answers: while no
	// daemon runs nobody listens (the test daemon holds the listeners).
	allowedOK := allowedAddr + "=ok\n"
	round := func(n int) {
		t.Helper()
		os.WriteFile(filepath.Join(w.ws, "go"+itoa(n)), nil, 0o644)
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "round"+itoa(n)+"\n"); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d did not finish: %s", n, out.String())
			}
		}
		got := strings.Split(out.String(), "round"+itoa(n)+"\n")[0]
		if n > 1 {
			got = strings.Split(got, "round"+itoa(n-1)+"\n")[1]
		}
		if !strings.Contains(got, allowedOK) || !strings.Contains(got, otherAddr+"=EPERM\n") {
			t.Fatalf("round %d: want %q and %s EPERM, got %q", n, allowedOK, otherAddr, got)
		}
	}
	round(1)

	d1.Process.Signal(syscall.SIGKILL)
	d1.Wait()
	if Available(w.socket) {
		t.Fatal("a daemon still answers after kill -9")
	}
	gens, keys := pinnedSessions(t, w, "net", "net_sessions")
	if len(gens) != 1 || !slices.Contains(keys, g.CgroupID) {
		t.Fatalf("after kill -9: pinned generations %+v with sessions %v, want one holding cgroup %d", gens, keys, g.CgroupID)
	}
	if links, err := gens[0].Links(); err != nil || len(links) == 0 {
		t.Fatalf("after kill -9: pinned links %v (%v)", links, err)
	}
	// No daemon runs: only the pinned programs can refuse.
	allowedOK = allowedAddr + "=ECONNREFUSED\n"
	round(2)
	allowedOK = allowedAddr + "=ok\n"
	if id, in, _ := sessionOfPID(w, target.Process.Pid); !in || id != ar.Session.ID {
		t.Fatalf("attached process left its session: %q %v", id, in)
	}

	d2, log2 := w.startDaemonInNetns(t, target.Process.Pid)
	// The socket answers before adoption is done: wait for its lines.
	for _, want := range []string{"session " + ar.Session.ID + ": layers applied again", "retired generation " + gens[0].Dir} {
		waitLog(t, log2, want)
	}
	gens2, keys2 := pinnedSessions(t, w, "net", "net_sessions")
	if len(gens2) != 1 || gens2[0].N != gens[0].N+1 || !slices.Contains(keys2, g.CgroupID) {
		t.Fatalf("after adoption: generations %+v with sessions %v, want only generation %d holding cgroup %d", gens2, keys2, gens[0].N+1, g.CgroupID)
	}
	// The refusal of round 2 was enforced while no daemon read events:
	// the adopting daemon counts it in one events_lost record.
	var unaudited uint64
	for _, r := range readRecords(t, w.audit) {
		if r.Ox.Kind == audit.KindEventsLost && r.Ox.Layer == audit.LayerCgroupNet {
			unaudited += r.Ox.EventsLost
		}
	}
	if unaudited < 1 {
		t.Errorf("no events_lost record counts the refusal enforced while no daemon ran")
	}
	before := len(denialsByDest(readRecords(t, w.audit), ar.Session.ID, otherAddr))
	round(3)
	var after int
	for deadline := time.Now().Add(5 * time.Second); after <= before && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		after = len(denialsByDest(readRecords(t, w.audit), ar.Session.ID, otherAddr))
	}
	if after <= before {
		t.Errorf("the adopting daemon wrote no denial record for %s of session %s (%d before round 3)", otherAddr, ar.Session.ID, before)
	}

	if res := w.runHelper(t, nobody, w.ws, nil, "stop", ar.Session.ID); res.code != 0 {
		t.Fatalf("stop the adopted session: %s", res.stderr)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, keys := pinnedSessions(t, w, "net", "net_sessions")
		if !slices.Contains(keys, g.CgroupID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stopped session's entry (cgroup %d) still in the pinned map: %v", g.CgroupID, keys)
		}
	}

	// A crash with no session left keeps the (now empty) generation: the
	// next start retires it. A graceful stop removes its pins
	// (TestDaemonStopPins).
	d2.Process.Signal(syscall.SIGKILL)
	d2.Wait()
	if gens, _ := pinnedSessions(t, w, "net", "net_sessions"); len(gens) != 1 {
		t.Fatalf("after kill -9 with no session: generations %+v, want the one pinned generation", gens)
	}
}

// denialsByDest returns the cgroup-layer denial records of session id for
// destination dest.
func denialsByDest(recs []audit.Record, id, dest string) []audit.Record {
	var out []audit.Record
	for _, r := range recs {
		if r.Ox.Kind == audit.KindDenial && r.Ox.Session == id && r.Ox.Layer == audit.LayerCgroupNet && r.Destination != nil &&
			netip.AddrPortFrom(r.Destination.IP, r.Destination.Port).String() == dest {
			out = append(out, r)
		}
	}
	return out
}
