//go:build linux

package daemon

import (
	"bufio"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/procfs"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/loader"
)

const (
	allowedAddr = "198.18.0.2:8080"
	otherAddr   = "198.18.0.3:8080"
)

// startDaemonInNetns runs the daemon as a process in a new network
// namespace whose lo carries two test addresses with listeners; the
// sessions it starts share that namespace, the API socket is a file and
// reachable from the test's.
//
// With nsPID > 0 the daemon joins the network namespace of process nsPID
// instead (one set up by an earlier call), as a restarted daemon would.
func (w *world) startDaemonInNetns(t *testing.T, nsPID int) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skipf("unshare(1) not found (%v): cannot give the daemon a private network namespace", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("ip(8) not found (%v): cannot put test addresses on the private loopback", err)
	}
	o, _ := json.Marshal(daemonProcOpts{Socket: w.socket, ManagedDir: w.opts.ManagedDir, AuditPath: w.audit,
		StateDir: w.opts.StateDir, PinDir: w.opts.PinDir, Parent: w.opts.Cgroup.Parent, RegistryDir: w.opts.Registry.Dir,
		Listen: []string{allowedAddr, otherAddr}, DNS: w.dns})
	setup := `ip link set lo up && ip addr add 198.18.0.2/32 dev lo && ip addr add 198.18.0.3/32 dev lo && exec "$0" "$@"`
	cmd := exec.Command("unshare", append([]string{"--net", "sh", "-c", setup, helper}, clientArgs("daemon")...)...)
	if nsPID > 0 {
		cmd = exec.Command("nsenter", append([]string{"--net=/proc/" + strconv.Itoa(nsPID) + "/ns/net", "--", helper}, clientArgs("daemon")...)...)
	}
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", daemonOptsEnv + "=" + string(o)}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", out.String())
		}
	})
	// The log reaches out through a pipe the exec package copies from, so
	// the socket can answer before the lines written ahead of it arrive:
	// wait for both (callers read what the daemon logged while starting).
	for deadline := time.Now().Add(60 * time.Second); !Available(w.socket) || !strings.Contains(out.String(), "listening on"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon process not answering:\n%s", out.String())
		}
	}
	return cmd, out
}

// requireSockAddr probes, independently of the daemon, whether cgroup
// sock_addr programs attach here.
func requireSockAddr(t *testing.T, w *world) {
	t.Helper()
	dir, err := cgroup.ParentDir(w.opts.Cgroup)
	if err != nil {
		t.Skipf("no session parent cgroup: %v", err)
	}
	if err := loader.ProbeCgroupSockAddr(dir); err != nil {
		t.Skipf("cgroup sock_addr programs do not attach on this kernel (%v): the network layer cannot be tested", err)
	}
}

func readRecords(t *testing.T, path string) []audit.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: bad line %q: %v", path, sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// denialsOf maps the destinations refused by the cgroup programs for
// session id to their records.
func denialsOf(recs []audit.Record, id string) map[string]audit.Record {
	out := map[string]audit.Record{}
	for _, r := range recs {
		if r.Ox.Kind == audit.KindDenial && r.Ox.Session == id && r.Ox.Layer == audit.LayerCgroupNet && r.Destination != nil {
			out[netip.AddrPortFrom(r.Destination.IP, r.Destination.Port).String()] = r
		}
	}
	return out
}

func startedSessions(recs []audit.Record) []string {
	var ids []string
	for _, r := range recs {
		if r.Ox.Kind == "session_start" {
			ids = append(ids, r.Ox.Session)
		}
	}
	return ids
}

func connectScript(addrs ...string) string {
	var b strings.Builder
	for _, a := range addrs {
		b.WriteString(helper + " " + connectVerb + " " + a + "; ")
	}
	b.WriteString("true")
	return b.String()
}

// Through the daemon, an unprivileged user's allowlist and network none
// are enforced by the daemon's cgroup programs: the allowed address
// connects, the other is refused with EPERM, and the refusal is an audit
// record of that session in the daemon's log.
func TestDaemonNetworkRun(t *testing.T) {
	w := newWorld(t)
	requireSockAddr(t, w)
	_, dlog := w.startDaemonInNetns(t, 0)
	if strings.Contains(dlog.String(), "cgroup network layer NOT built") {
		t.Fatalf("the probe attaches sock_addr programs but the daemon did not build its network layer:\n%s", dlog.String())
	}
	for _, tc := range []struct {
		net, allow string
		want       map[string]string
	}{
		{"allowlist", allowedAddr, map[string]string{allowedAddr: "ok", otherAddr: "EPERM"}},
		{"none", "-", map[string]string{allowedAddr: "EPERM", otherAddr: "EPERM"}},
	} {
		t.Run(tc.net, func(t *testing.T) {
			before := len(startedSessions(readRecords(t, w.audit)))
			res := w.runHelper(t, nobody, w.ws, nil, "netrun", w.ws, tc.net, tc.allow, "sh", "-c", connectScript(allowedAddr, otherAddr))
			if res.code != 0 {
				t.Fatalf("exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
			}
			for addr, want := range tc.want {
				if !strings.Contains(res.stdout, addr+"="+want+"\n") {
					t.Errorf("connect %s: want %s; stdout:\n%s\nstderr:\n%s", addr, want, res.stdout, res.stderr)
				}
			}
			if strings.Contains(res.stderr, "network namespace instead") {
				t.Errorf("the session fell back to a network namespace: %s", res.stderr)
			}
			recs := readRecords(t, w.audit)
			ids := startedSessions(recs)
			if len(ids) != before+1 {
				t.Fatalf("session_start records: %v, want one more than %d", ids, before)
			}
			denials := denialsOf(recs, ids[len(ids)-1])
			for addr, want := range tc.want {
				_, denied := denials[addr]
				if denied != (want == "EPERM") {
					t.Errorf("%s: denial record %v, want %v (records of session %s: %v)", addr, denied, want == "EPERM", ids[len(ids)-1], denials)
				}
			}
		})
	}
}

// Attach through the daemon with network rules: the attached process is
// held to its allowlist by the daemon's programs, with audit records, and
// the rules are released when the session ends.
func TestDaemonNetworkAttach(t *testing.T) {
	w := newWorld(t)
	requireSockAddr(t, w)
	w.startDaemonInNetns(t, 0)
	// The target runs in the daemon's namespace (nsenter by the daemon
	// pid would need the pid; the sessions' namespace is the daemon's).
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skipf("nsenter(1) not found (%v): cannot start a process in the daemon's network namespace", err)
	}
	goFile := filepath.Join(w.ws, "go")
	dpid := daemonPID(t, w)
	script := "while [ ! -e " + goFile + " ]; do sleep 0.05; done; " + connectScript(allowedAddr, otherAddr)
	// nsenter (root, for setns) drops to nobody and execs sh in place:
	// its pid is the target's.
	target, out := w.startNobodyTarget(t, dpid, script)
	ar := w.attachNet(t, target.Process.Pid, "allowlist", allowedAddr)
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { target.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(20 * time.Second):
		t.Fatalf("attached process did not finish: %s", out.String())
	}
	got := out.String()
	if !strings.Contains(got, allowedAddr+"=ok\n") || !strings.Contains(got, otherAddr+"=EPERM\n") {
		t.Fatalf("attached process: want %s ok and %s EPERM, got:\n%s", allowedAddr, otherAddr, got)
	}
	// The session ends with its last process: the daemon releases its
	// rules (writing the refusals first) and removes the group.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids, _ := cgroupSessions(w)
		if len(ids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("attach session groups left after the process exited: %v", ids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	denials := denialsOf(readRecords(t, w.audit), ar.Session.ID)
	if _, ok := denials[otherAddr]; !ok {
		t.Errorf("no denial record for %s in session %s", otherAddr, ar.Session.ID)
	}
	if _, ok := denials[allowedAddr]; ok {
		t.Errorf("a denial record for the allowed %s", allowedAddr)
	}
}

// daemonPID asks the daemon for its pid (GET /health).
func daemonPID(t *testing.T, w *world) int {
	t.Helper()
	var h struct {
		PID int `json:"pid"`
	}
	c := &Client{Socket: w.socket}
	if err := c.do(t.Context(), "GET", "/health", nil, &h); err != nil || h.PID <= 0 {
		t.Fatalf("health: %+v %v", h, err)
	}
	return h.PID
}

// A daemon whose network layer did not build keeps serving, logs it at
// error level, and never runs a session under a weaker boundary: an
// allowlist is refused with 125 naming the layer, network none falls back
// to an empty network namespace and the client is told.
func TestDaemonNetworkLayerUnbuilt(t *testing.T) {
	w := newWorld(t)
	w.opts.Unavailable = map[string]bool{"network": true}
	w.start(t)
	if !strings.Contains(w.log.String(), `"level":"error"`) || !strings.Contains(w.log.String(), "cgroup network layer NOT built") {
		t.Fatalf("no error-level log line for the missing network layer:\n%s", w.log.String())
	}
	res := w.runHelper(t, nobody, w.ws, nil, "netrun", w.ws, "allowlist", allowedAddr, "true")
	if res.code != 125 || !strings.Contains(res.stderr, "network") {
		t.Fatalf("allowlist without the network layer: exit %d, want 125 naming the network layer\nstderr %s", res.code, res.stderr)
	}
	if ids, _ := cgroupSessions(w); len(ids) != 0 {
		t.Fatalf("a refused session left groups: %v", ids)
	}
	res = w.runHelper(t, nobody, w.ws, nil, "netrun", w.ws, "none", "-", "sh", "-c", connectScript(otherAddr))
	if res.code != 0 || !strings.Contains(res.stderr, "empty network namespace instead") {
		t.Fatalf("none without the network layer: exit %d, want 0 with a fallback warning\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	// In an empty namespace the address does not exist: ENETUNREACH, not
	// a connection.
	if strings.Contains(res.stdout, otherAddr+"=ok") || !strings.Contains(res.stdout, otherAddr+"=") {
		t.Fatalf("connect in the fallback namespace: %s", res.stdout)
	}
}

// The network programs live in the daemon process, so a kill -9 takes
// them away; the next daemon adopts the attach session and applies its
// allowlist again from the saved policy.
func TestDaemonNetworkReappliedOnAdopt(t *testing.T) {
	w := newWorld(t)
	requireSockAddr(t, w)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skipf("nsenter(1) not found (%v)", err)
	}
	d1, _ := w.startDaemonInNetns(t, 0)
	go1, go2 := filepath.Join(w.ws, "go1"), filepath.Join(w.ws, "go2")
	wait := func(f string) string { return "while [ ! -e " + f + " ]; do sleep 0.05; done; " }
	script := wait(go1) + connectScript(allowedAddr, otherAddr) + "; echo round1; " + wait(go2) + connectScript(allowedAddr, otherAddr)
	target, out := w.startNobodyTarget(t, d1.Process.Pid, script)
	ar := w.attachNet(t, target.Process.Pid, "allowlist", allowedAddr)
	round := func(n int, marker string) string {
		t.Helper()
		os.WriteFile(marker, nil, 0o644)
		for deadline := time.Now().Add(10 * time.Second); strings.Count(out.String(), otherAddr+"=") < n || (n == 1 && !strings.Contains(out.String(), "round1\n")); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d did not finish: %s", n, out.String())
			}
		}
		return strings.Split(out.String(), "round1\n")[n-1]
	}
	r1 := round(1, go1)
	if !strings.Contains(r1, allowedAddr+"=ok\n") || !strings.Contains(r1, otherAddr+"=EPERM\n") {
		t.Fatalf("before the restart: %s", out.String())
	}
	d1.Process.Signal(syscall.SIGKILL)
	d1.Wait()
	_, log2 := w.startDaemonInNetns(t, target.Process.Pid)
	waitLog(t, log2, "session "+ar.Session.ID+": layers applied again")
	r2 := round(2, go2)
	if !strings.Contains(r2, allowedAddr+"=ok\n") || !strings.Contains(r2, otherAddr+"=EPERM\n") {
		t.Fatalf("after the restart, want %s ok and %s EPERM: %q", allowedAddr, otherAddr, r2)
	}
}

// startNobodyTarget runs script as nobody in the network namespace of
// process nsPID and returns once it runs as nobody (nsenter, root for
// setns, drops the uid before it execs sh in place: its pid is the
// target's), so that attach sees the final owner. It is killed at the end
// of the test (killed, not reaped: callers may wait for it).
func (w *world) startNobodyTarget(t *testing.T, nsPID int, script string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	target := exec.Command("nsenter", "--net=/proc/"+strconv.Itoa(nsPID)+"/ns/net", "--setuid", itoa(nobody), "--setgid", itoa(nobody), "--", "sh", "-c", script)
	target.Dir = w.ws
	out := &syncBuffer{}
	target.Stdout, target.Stderr = out, out
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Process.Kill() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := procfs.ReadStatus(target.Process.Pid); err == nil && st.UID[procfs.Real] == nobody && st.UID[procfs.Effective] == nobody {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("target never ran as uid %d: %s", nobody, out.String())
		}
	}
	return target, out
}
