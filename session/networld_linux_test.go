//go:build linux

package session_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/testutil"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
)

// Addresses of the test's private peer network namespace (RFC 2544
// benchmark range, on its lo), reached from the test's host namespace over
// a veth pair: nothing leaves the two namespaces. ownAddr is the host's
// end of the veth, one of the host's own non-loopback addresses, which
// sessions must reach only as loopback.
var (
	hostA   = netip.MustParseAddr("198.18.0.1")
	hostB   = netip.MustParseAddr("198.18.0.2")
	dnsHost = netip.MustParseAddr("198.18.0.53")
	ownAddr = netip.MustParseAddr("198.19.0.1")
	peerEnd = netip.MustParseAddr("198.19.0.2")
)

// netWorld is a pair of network namespaces private to one test, each
// entered by one locked OS thread: the host (where the supervisor and the
// sessions run) and the peer (the remote hosts). Sockets created and
// processes started through do / doPeer live in them (a socket keeps the
// namespace it was created in; a child inherits the namespace of the
// thread that forked it).
type netWorld struct {
	req     chan func()
	peerReq chan func()
	// accepted counts connections accepted per listener address.
	mu       sync.Mutex
	accepted map[string]int
}

func newNetWorld(t *testing.T) *netWorld {
	t.Helper()
	w := &netWorld{req: make(chan func()), peerReq: make(chan func()), accepted: map[string]int{}}
	peerNS, err := nsThread(w.peerReq, []netip.Addr{hostA, hostB, dnsHost}, [][]string{
		{"ip", "link", "set", "lo", "up"},
	})
	if err != nil {
		t.Skipf("SKIP: cannot build the test's private peer network namespace: %v", err)
	}
	t.Cleanup(func() { close(w.peerReq) })
	if _, err := nsThread(w.req, nil, [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", "oxh", "type", "veth", "peer", "name", "oxp", "netns", peerNS},
		{"ip", "addr", "add", ownAddr.String() + "/24", "dev", "oxh"},
		{"ip", "link", "set", "oxh", "up"},
		{"ip", "route", "add", "198.18.0.0/24", "via", peerEnd.String()},
	}); err != nil {
		t.Skipf("SKIP: cannot build the test's private network namespace: %v", err)
	}
	t.Cleanup(func() { close(w.req) })
	var out []byte
	w.doPeer(func() {
		for _, c := range [][]string{
			{"ip", "addr", "add", peerEnd.String() + "/24", "dev", "oxp"},
			{"ip", "link", "set", "oxp", "up"},
			{"ip", "route", "add", "default", "via", ownAddr.String()},
		} {
			if out, err = exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
				err = fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, out)
				return
			}
		}
	})
	if err != nil {
		t.Fatalf("peer side of the veth: %v", err)
	}
	return w
}

// nsThread starts a locked thread in a new network namespace that runs
// cmds, adds addrs to its lo and then serves req; it returns the
// namespace's path.
func nsThread(req chan func(), addrs []netip.Addr, cmds [][]string) (string, error) {
	type result struct {
		path string
		err  error
	}
	ready := make(chan result)
	go func() {
		// Never unlocked: the thread ends with this goroutine instead of
		// going back to the scheduler in the test's namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- result{err: fmt.Errorf("unshare(CLONE_NEWNET): %w", err)}
			return
		}
		for _, a := range addrs {
			cmds = append(cmds, []string{"ip", "addr", "add", a.String() + "/32", "dev", "lo"})
		}
		for _, c := range cmds {
			if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
				ready <- result{err: fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, out)}
				return
			}
		}
		ready <- result{path: fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())}
		for f := range req {
			f()
		}
	}()
	r := <-ready
	return r.path, r.err
}

// doPeer runs f on the peer namespace's thread.
func (w *netWorld) doPeer(f func()) {
	done := make(chan struct{})
	w.peerReq <- func() { defer close(done); f() }
	<-done
}

// do runs f on the namespace's thread.
func (w *netWorld) do(f func()) {
	done := make(chan struct{})
	w.req <- func() { defer close(done); f() }
	<-done
}

// listen starts a TCP listener at addr that counts and closes every
// connection: in the host namespace for a loopback or unspecified address
// (a service of the host), in the peer for the others (a remote host).
func (w *netWorld) listen(t *testing.T, addr string) {
	t.Helper()
	var ln net.Listener
	var err error
	in := w.doPeer
	if a, perr := netip.ParseAddrPort(addr); perr == nil && (a.Addr().IsLoopback() || a.Addr().IsUnspecified()) {
		in = w.do
	}
	in(func() { ln, err = net.Listen("tcp4", addr) })
	if err != nil {
		t.Fatal(err)
	}
	testutil.Serve(t, ln, func(c net.Conn) {
		w.mu.Lock()
		w.accepted[addr]++
		w.mu.Unlock()
		c.Close()
	})
}

func (w *netWorld) acceptedAt(addr string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.accepted[addr]
}

// serveDNS runs an authoritative server for zone at dnsHost:53 (UDP and
// TCP) inside the namespace: the sessions' resolvers' upstream.
func (w *netWorld) serveDNS(t *testing.T, zone map[string]netip.Addr) string {
	t.Helper()
	addr := netip.AddrPortFrom(dnsHost, 53).String()
	var pc net.PacketConn
	var ln net.Listener
	var err error
	w.doPeer(func() {
		if pc, err = net.ListenPacket("udp4", addr); err != nil {
			return
		}
		ln, err = net.Listen("tcp4", addr)
	})
	if err != nil {
		t.Fatal(err)
	}
	handler := dns.HandlerFunc(func(rw dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Authoritative = true
		q := req.Question[0]
		ip, ok := zone[strings.ToLower(strings.TrimSuffix(q.Name, "."))]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: ip.AsSlice()})
		}
		rw.WriteMsg(m)
	})
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: handler}, {Listener: ln, Handler: handler}} {
		go srv.ActivateAndServe()
		t.Cleanup(func() { srv.Shutdown() })
	}
	return addr
}

// start starts bin with args inside the namespace.
func (w *netWorld) start(t *testing.T, e *env, extraEnv []string, stdin io.Reader, stdout, stderr io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.ws
	cmd.Env = append(os.Environ(), "HOME="+e.home, "FSOP="+fsop)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	var err error
	w.do(func() { err = cmd.Start() })
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// netRun runs `oxsupervise run` with args inside the namespace; the
// command's stdout lines "key=value" are returned as a map.
func (w *netWorld) netRun(t *testing.T, e *env, auditLog string, extraEnv []string, args ...string) (map[string]string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := w.start(t, e, extraEnv, nil, &stdout, &stderr, append([]string{"run", "--audit-log", auditLog}, args...)...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("oxsupervise run %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("oxsupervise run %v: timed out\nstderr:\n%s", args, stderr.String())
	}
	return keyValues(stdout.String()), stderr.String()
}

func keyValues(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = strings.TrimSpace(v)
		}
	}
	return got
}

// script prints name=RESULT for each fsop connect.
func connectScript(targets map[string]string) string {
	var b strings.Builder
	for name, addr := range targets {
		fmt.Fprintf(&b, "printf '%%s=' %s; \"$FSOP\" connect %s\n", name, addr)
	}
	return b.String()
}

// readAudit decodes every record of the log.
func readAudit(t testing.TB, path string) []audit.Record {
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
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("invalid audit record %s: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// sessionOf returns the id of the (only) session a log's session_start names.
func sessionIDs(recs []audit.Record) []string {
	var ids []string
	for _, r := range recs {
		if r.Ox.Kind == audit.KindSessionStart {
			ids = append(ids, r.Ox.Session)
		}
	}
	return ids
}

// netDenials returns the cgroup-layer network denials of session id,
// keyed by destination ip:port.
func netDenials(recs []audit.Record, id string) map[string]audit.Record {
	out := map[string]audit.Record{}
	for _, r := range recs {
		if r.Ox.Kind == audit.KindDenial && r.Ox.Session == id && r.Ox.Layer == audit.LayerCgroupNet && r.Destination != nil {
			out[netip.AddrPortFrom(r.Destination.IP, r.Destination.Port).String()] = r
		}
	}
	return out
}

func requireNetLayer(t *testing.T) {
	t.Helper()
	requireRoot(t)
	landlockABI(t)
	cgroup2Mount(t)
}

// safeBuffer is a bytes.Buffer written by a process and read by the test.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
