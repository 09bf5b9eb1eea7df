//go:build linux

package session_test

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/session"
)

// TestNetLayerRunNone: network none through cgroup BPF refuses a connect
// to another address with EPERM, audits it with the session id, and keeps
// the session's own loopback working.
func TestNetLayerRunNone(t *testing.T) {
	requireNetLayer(t)
	e := newEnv(t)
	w := newNetWorld(t)
	target := netip.AddrPortFrom(hostA, 8080).String()
	w.listen(t, target)
	log := filepath.Join(e.base, "audit.jsonl")
	got, stderr := w.netRun(t, e, log, nil, "--net", "none", "--", "sh", "-c",
		connectScript(map[string]string{"remote": target})+`printf 'loopback='; "$FSOP" loopback`)
	if got["remote"] != "EPERM" {
		t.Errorf("connect %s: got %q, want EPERM; stderr:\n%s", target, got["remote"], stderr)
	}
	if got["loopback"] != "OK" {
		t.Errorf("session-local loopback: got %q, want OK", got["loopback"])
	}
	if n := w.acceptedAt(target); n != 0 {
		t.Errorf("listener at %s accepted %d connections", target, n)
	}
	if strings.Contains(stderr, "network namespace instead") {
		t.Errorf("run fell back to a network namespace although cgroup BPF works:\n%s", stderr)
	}
	recs := readAudit(t, log)
	ids := sessionIDs(recs)
	if len(ids) != 1 {
		t.Fatalf("want one session_start, got %v", ids)
	}
	r, ok := netDenials(recs, ids[0])[target]
	if !ok {
		t.Fatalf("no cgroup denial for %s of session %s in the log", target, ids[0])
	}
	if r.Event.Action != "connect" || r.Ox.Errno != int(unix.EPERM) || r.Ox.Class != audit.ClassNetwork ||
		r.Process == nil || r.Process.PID == 0 || r.Network == nil || r.Network.Transport != "tcp" {
		t.Errorf("denial record incomplete: %+v", r)
	}
	assertDenialsBeforeStop(t, recs, ids[0])
}

// assertDenialsBeforeStop: the layer drains the kernel's events before the
// session ends, so no refusal follows its session_stop.
func assertDenialsBeforeStop(t *testing.T, recs []audit.Record, id string) {
	t.Helper()
	stopped := false
	for _, r := range recs {
		if r.Ox.Session != id {
			continue
		}
		switch {
		case r.Ox.Kind == audit.KindSessionStop:
			stopped = true
		case stopped:
			t.Errorf("%s record after session_stop: %s", r.Ox.Kind, r.Message)
		}
	}
	if !stopped {
		t.Errorf("no session_stop for %s", id)
	}
}

// TestNetLayerRunAllowlist: an IP:port allowlist admits exactly that
// destination; another port and another host are refused and audited.
func TestNetLayerRunAllowlist(t *testing.T) {
	requireNetLayer(t)
	e := newEnv(t)
	w := newNetWorld(t)
	allowed := netip.AddrPortFrom(hostA, 8080).String()
	otherPort := netip.AddrPortFrom(hostA, 9090).String()
	otherHost := netip.AddrPortFrom(hostB, 8080).String()
	for _, a := range []string{allowed, otherPort, otherHost} {
		w.listen(t, a)
	}
	log := filepath.Join(e.base, "audit.jsonl")
	got, stderr := w.netRun(t, e, log, nil, "--net", "allowlist", "--allow-net", allowed, "--", "sh", "-c",
		connectScript(map[string]string{"allowed": allowed, "port": otherPort, "host": otherHost}))
	for _, tc := range []struct{ name, addr, want string }{
		{"allowed", allowed, "OK"}, {"port", otherPort, "EPERM"}, {"host", otherHost, "EPERM"},
	} {
		if got[tc.name] != tc.want {
			t.Errorf("connect %s: got %q, want %s; stderr:\n%s", tc.addr, got[tc.name], tc.want, stderr)
		}
	}
	time.Sleep(100 * time.Millisecond) // accept runs concurrently
	if w.acceptedAt(allowed) != 1 || w.acceptedAt(otherPort) != 0 || w.acceptedAt(otherHost) != 0 {
		t.Errorf("accepted: allowed %d, other port %d, other host %d; want 1, 0, 0",
			w.acceptedAt(allowed), w.acceptedAt(otherPort), w.acceptedAt(otherHost))
	}
	recs := readAudit(t, log)
	ids := sessionIDs(recs)
	if len(ids) != 1 {
		t.Fatalf("want one session_start, got %v", ids)
	}
	denials := netDenials(recs, ids[0])
	for _, a := range []string{otherPort, otherHost} {
		if _, ok := denials[a]; !ok {
			t.Errorf("no denial record for %s", a)
		}
	}
	if _, ok := denials[allowed]; ok {
		t.Errorf("a denial record for the allowed %s", allowed)
	}
}

// TestNetLayerRunHostnames: with a hostname allowlist the session's DNS
// goes to the supervisor's resolver, which answers the allowed name (and
// admits its address) and refuses the others with a resolver record; the
// other name's address stays unreachable.
func TestNetLayerRunHostnames(t *testing.T) {
	requireNetLayer(t)
	if _, err := exec.LookPath("getent"); err != nil {
		t.Skip("SKIP: getent (libc-bin) is needed to resolve names the way programs do")
	}
	e := newEnv(t)
	w := newNetWorld(t)
	upstream := w.serveDNS(t, map[string]netip.Addr{"allowed.test": hostA, "other.test": hostB})
	allowed := netip.AddrPortFrom(hostA, 8080).String()
	other := netip.AddrPortFrom(hostB, 8080).String()
	w.listen(t, allowed)
	w.listen(t, other)
	log := filepath.Join(e.base, "audit.jsonl")
	script := `printf 'resolve-allowed='; getent ahostsv4 allowed.test | awk 'NR==1{print $1}' | grep . || echo FAIL
printf 'resolve-other='; getent ahostsv4 other.test | awk 'NR==1{print $1}' | grep . || echo FAIL
` + connectScript(map[string]string{"allowed": allowed, "other": other})
	got, stderr := w.netRun(t, e, log, []string{"OXSUPERVISE_RESOLVER_UPSTREAM=" + upstream},
		"--net", "allowlist", "--allow-net", "allowed.test:8080", "--", "sh", "-c", script)
	want := map[string]string{"resolve-allowed": hostA.String(), "resolve-other": "FAIL", "allowed": "OK", "other": "EPERM"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q; stderr:\n%s", k, got[k], v, stderr)
		}
	}
	recs := readAudit(t, log)
	ids := sessionIDs(recs)
	if len(ids) != 1 {
		t.Fatalf("want one session_start, got %v", ids)
	}
	var refusedOther bool
	for _, r := range recs {
		if r.Ox.Kind != audit.KindDenial || r.Ox.Layer != audit.LayerResolver || r.Ox.Session != ids[0] {
			continue
		}
		if r.DNS == nil || r.Event.Action != "dns" || r.Ox.Class != audit.ClassDNS {
			t.Errorf("resolver record incomplete: %+v", r)
			continue
		}
		if r.DNS.Question.Name == "allowed.test" {
			t.Errorf("the allowed name was refused: %+v", r)
		}
		if r.DNS.Question.Name == "other.test" && r.DNS.ResponseCode == "REFUSED" {
			refusedOther = true
		}
	}
	if !refusedOther {
		t.Error("no resolver record refusing other.test")
	}
	if _, ok := netDenials(recs, ids[0])[other]; !ok {
		t.Errorf("no cgroup denial for %s", other)
	}
}

// TestNetLayerAttach: attach confines a running process's network; the
// supervisor holds the rules until the process exits, then ends the
// session.
func TestNetLayerAttach(t *testing.T) {
	requireNetLayer(t)
	e := newEnv(t)
	w := newNetWorld(t)
	target := netip.AddrPortFrom(hostA, 8080).String()
	w.listen(t, target)
	log := filepath.Join(e.base, "audit.jsonl")

	// The victim connects once before and once after it is attached.
	stdinR, stdinW := io.Pipe()
	var victimOut safeBuffer
	victim := exec.Command("sh", "-c", `printf 'before='; "$FSOP" connect `+target+`; read x; printf 'after='; "$FSOP" connect `+target)
	victim.Env = append(os.Environ(), "FSOP="+fsop)
	victim.Stdin, victim.Stdout = stdinR, &victimOut
	var err error
	w.do(func() { err = victim.Start() })
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(victimOut.String(), "before=") || !strings.Contains(victimOut.String(), "\n") {
		if time.Now().After(deadline) {
			t.Fatalf("victim did not connect before attach: %q", victimOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	var out, stderr safeBuffer
	// The network layer is under test: without BPF-LSM the policy's
	// filesystem rules cannot hold a running process, and attach goes on
	// only when asked to (TestAttachFailsClosedWithoutBPFLSM).
	sup := w.start(t, e, nil, nil, &out, &stderr, "attach", "--network-only", "--pid", fmt.Sprint(victim.Process.Pid),
		"--net", "none", "--audit-log", log)
	supDone := make(chan error, 1)
	go func() { supDone <- sup.Wait() }()
	var id string
	for deadline := time.Now().Add(30 * time.Second); id == ""; {
		if s := strings.TrimSpace(out.String()); s != "" {
			id = s
			break
		}
		select {
		case err := <-supDone:
			t.Fatalf("attach exited early: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			sup.Process.Kill()
			t.Fatalf("attach printed no session id:\n%s", stderr.String())
		}
	}
	fmt.Fprintln(stdinW, "go")
	stdinW.Close()
	if err := victim.Wait(); err != nil {
		t.Fatalf("victim: %v", err)
	}
	select {
	case err := <-supDone:
		if err != nil {
			t.Errorf("attach: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		sup.Process.Kill()
		t.Fatalf("attach did not end with its session:\n%s", stderr.String())
	}
	got := keyValues(victimOut.String())
	if got["before"] != "OK" || got["after"] != "EPERM" {
		t.Errorf("victim: before attach %q (want OK), after %q (want EPERM)", got["before"], got["after"])
	}
	if _, err := os.Stat(filepath.Join(cgroup2Mount(t), "oxsupervise", id)); !os.IsNotExist(err) {
		t.Errorf("session group %s still exists after its process exited (%v)", id, err)
	}
	r, ok := netDenials(readAudit(t, log), id)[target]
	if !ok {
		t.Fatalf("no denial record for %s of attached session %s", target, id)
	}
	if r.Process == nil || r.Process.PID == 0 {
		t.Errorf("denial without the acting process: %+v", r)
	}
}

// TestNetLayerConcurrentSessions: two runs with different allowlists at
// the same time; each supervisor's programs judge only their own session
// and allow unknown ones, so each session gets exactly its own policy.
func TestNetLayerConcurrentSessions(t *testing.T) {
	requireNetLayer(t)
	e := newEnv(t)
	w := newNetWorld(t)
	a := netip.AddrPortFrom(hostA, 8080).String()
	b := netip.AddrPortFrom(hostB, 8080).String()
	w.listen(t, a)
	w.listen(t, b)
	// Both sessions exist while either connects: each waits for the
	// other's marker first.
	script := func(me, other string) string {
		return fmt.Sprintf(`touch %q; i=0; while [ ! -e %q ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
`, filepath.Join(e.ws, me), filepath.Join(e.ws, other)) + connectScript(map[string]string{"a": a, "b": b}) + "sleep 0.3\n"
	}
	type result struct {
		got    map[string]string
		stderr string
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	var ran atomic.Int32
	for i, allow := range []string{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, stderr := w.netRun(t, e, filepath.Join(e.base, fmt.Sprintf("audit%d.jsonl", i)), nil,
				"--net", "allowlist", "--allow-net", allow, "--", "sh", "-c",
				script(fmt.Sprintf("ready%d", i), fmt.Sprintf("ready%d", 1-i)))
			results[i] = result{got, stderr}
			ran.Add(1)
		}()
	}
	wg.Wait()
	if ran.Load() != 2 {
		t.FailNow()
	}
	for _, m := range []string{"ready0", "ready1"} {
		if !exists(filepath.Join(e.ws, m)) {
			t.Fatalf("session marker %s missing: the sessions did not overlap", m)
		}
	}
	want := []map[string]string{{"a": "OK", "b": "EPERM"}, {"a": "EPERM", "b": "OK"}}
	for i := range want {
		for k, v := range want[i] {
			if results[i].got[k] != v {
				t.Errorf("session %d (allow %v) connect %s: got %q, want %s; stderr:\n%s",
					i, []string{a, b}[i], k, results[i].got[k], v, results[i].stderr)
			}
		}
	}
}

// TestNetLayerUnbuildable: when the cgroup network layer cannot be built
// (here: an unusable resolver upstream), an allowlist run fails closed
// with 125 naming the layer and runs nothing, while network none falls
// back to an empty network namespace and says so.
func TestNetLayerUnbuildable(t *testing.T) {
	requireNetLayer(t)
	e := newEnv(t)
	w := newNetWorld(t)
	target := netip.AddrPortFrom(hostA, 8080).String()
	w.listen(t, target)
	bad := []string{"OXSUPERVISE_RESOLVER_UPSTREAM=not-a-host-port"}
	log := filepath.Join(e.base, "audit.jsonl")

	marker := filepath.Join(e.ws, "marker")
	var stderr bytes.Buffer
	cmd := w.start(t, e, bad, nil, io.Discard, &stderr, "run", "--audit-log", log,
		"--net", "allowlist", "--allow-net", target, "--", "touch", marker)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
		t.Errorf("allowlist without the network layer: %v, want exit 125; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "layer network") {
		t.Errorf("the error does not name the network layer:\n%s", stderr.String())
	}
	if exists(marker) {
		t.Error("the command ran although its allowlist could not be enforced")
	}

	got, errOut := w.netRun(t, e, log, bad, "--net", "none", "--", "sh", "-c", connectScript(map[string]string{"remote": target}))
	if !strings.Contains(errOut, "empty network namespace instead") {
		t.Errorf("no warning about the network namespace fallback:\n%s", errOut)
	}
	// In its own empty namespace the session has no route to the host.
	if got["remote"] != "ENETUNREACH" {
		t.Errorf("connect %s under the fallback: got %q, want ENETUNREACH", target, got["remote"])
	}
	if n := w.acceptedAt(target); n != 0 {
		t.Errorf("listener at %s accepted %d connections", target, n)
	}
}

// TestNetLayerBurstAccounted: a burst of refused connects is accounted for
// exactly: denial records plus flood control's suppressed counts plus
// events_lost equal the refusals the command saw. Nothing is dropped
// unseen.
func TestNetLayerBurstAccounted(t *testing.T) {
	requireNetLayer(t)
	e := newEnv(t)
	w := newNetWorld(t)
	burst := filepath.Join(t.TempDir(), "netburst")
	if out, err := exec.Command("go", "build", "-o", burst, "./testdata/netburst").CombinedOutput(); err != nil {
		t.Fatalf("go build netburst: %v\n%s", err, out)
	}
	os.Chmod(filepath.Dir(burst), 0o755)
	const n = 20000
	log := filepath.Join(e.base, "audit.jsonl")
	got, stderr := w.netRun(t, e, log, nil, "--net", "none", "--", burst, fmt.Sprint(n), netip.AddrPortFrom(hostA, 8080).String())
	if got["eperm"] != fmt.Sprint(n) {
		t.Fatalf("refused connects: got %q of %d (other: %q); stderr:\n%s", got["eperm"], n, got["other"], stderr)
	}
	recs := readAudit(t, log)
	ids := sessionIDs(recs)
	if len(ids) != 1 {
		t.Fatalf("want one session_start, got %v", ids)
	}
	var denials, suppressed, lost uint64
	for _, r := range recs {
		switch {
		case r.Ox.Kind == audit.KindDenial && r.Ox.Session == ids[0] && r.Ox.Layer == audit.LayerCgroupNet:
			denials++
		case r.Ox.Kind == audit.KindSuppressed && r.Ox.Session == ids[0]:
			suppressed += r.Ox.Suppressed
		case r.Ox.Kind == audit.KindEventsLost && r.Ox.Layer == audit.LayerCgroupNet:
			lost += r.Ox.EventsLost
		}
	}
	t.Logf("%d refusals: %d denial records, %d suppressed, %d events lost", n, denials, suppressed, lost)
	if denials+suppressed+lost != n {
		t.Errorf("denials %d + suppressed %d + lost %d = %d, want exactly %d", denials, suppressed, lost, denials+suppressed+lost, n)
	}
	if denials == 0 {
		t.Error("no denial record at all")
	}
}

// TestNetLayerRunFull: network full still applies the loopback setting
// (default "session": the host's loopback services are refused, the
// session's own work); full-access (loopback all) needs no network layer.
func TestNetLayerRunFull(t *testing.T) {
	requireNetLayer(t)
	e := newEnv(t)
	w := newNetWorld(t)
	remote := netip.AddrPortFrom(hostA, 8080).String()
	hostLoopback := "127.0.0.1:8081"
	// A host service on every address, reached through the host's own
	// non-loopback address: loopback all the same.
	hostAddr := netip.AddrPortFrom(ownAddr, 8082).String()
	w.listen(t, remote)
	w.listen(t, hostLoopback)
	w.listen(t, "0.0.0.0:8082")
	script := connectScript(map[string]string{"remote": remote, "hostlo": hostLoopback, "hostaddr": hostAddr}) +
		`printf 'own='; "$FSOP" loopback` + "\n"
	for _, tc := range []struct {
		name  string
		flags []string
		want  map[string]string
		layer bool
	}{
		{"full", []string{"--net", "full"}, map[string]string{"remote": "OK", "hostlo": "EPERM", "hostaddr": "EPERM", "own": "OK"}, true},
		{"full-access", []string{"--sandbox", "full-access"}, map[string]string{"remote": "OK", "hostlo": "OK", "hostaddr": "OK", "own": "OK"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(e.base, tc.name+".jsonl")
			got, stderr := w.netRun(t, e, log, nil, append(tc.flags, "--", "sh", "-c", script)...)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: got %q, want %s; stderr:\n%s", k, got[k], v, stderr)
				}
			}
			var start audit.Record
			recs := readAudit(t, log)
			for _, r := range recs {
				if r.Ox.Kind == audit.KindSessionStart {
					start = r
				}
			}
			layers := strings.Split(strings.TrimPrefix(start.Ox.Rule, "layers: "), ",")
			if has := contains(layers, session.LayerNetwork); has != tc.layer {
				t.Errorf("session layers %q: network layer present = %v, want %v", start.Ox.Rule, has, tc.layer)
			}
			if tc.want["hostaddr"] == "EPERM" {
				d, ok := netDenials(recs, start.Ox.Session)[hostAddr]
				if !ok || d.Event.Action != "connect" || d.Event.Reason != "loopback" || d.Ox.Errno != int(unix.EPERM) {
					t.Errorf("denial record for the host's own %s: %+v (found %v), want connect refused as loopback", hostAddr, d, ok)
				}
			}
		})
	}
}
