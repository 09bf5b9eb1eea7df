//go:build linux

package egress

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit/bpfring"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
)

const netnsEnv = "OXS_EGRESS_NETNS"

// The tests run in a network namespace private to this test binary (the
// "host": where the sessions and the supervisor live) joined by a veth
// pair to a second private namespace (the "peer"), so no test traffic can
// leave them. The remote test hosts are addresses of the peer's lo,
// reached over the veth: neither loopback nor the host's own addresses.
// ownV4 and ownV6 are the host's end of the veth: this host's own
// non-loopback addresses, which the programs must judge as loopback.
var (
	ownV4    = netip.MustParseAddr("198.19.0.1")
	peerV4   = netip.MustParseAddr("198.19.0.2")
	ownV6    = netip.MustParseAddr("2001:db8:1::1")
	peerV6   = netip.MustParseAddr("2001:db8:1::2")
	hostA    = netip.MustParseAddr("198.18.0.1")
	hostB    = netip.MustParseAddr("198.18.0.2")
	hostC    = netip.MustParseAddr("198.18.0.3")
	hostD    = netip.MustParseAddr("198.18.0.4")
	hostE    = netip.MustParseAddr("198.18.0.5")
	hostF    = netip.MustParseAddr("198.18.0.6")
	hostG    = netip.MustParseAddr("198.18.0.7")
	hostV6   = netip.MustParseAddr("2001:db8::1")
	metadata = netip.MustParseAddr("169.254.169.254")
	// linkLocal is a link-local address other than the metadata service.
	linkLocal = netip.MustParseAddr("169.254.1.1")
)

func TestMain(m *testing.M) {
	testutil.RunOp(ops)
	if os.Geteuid() == 0 && os.Getenv(netnsEnv) == "" {
		// Re-run the whole binary in a fresh network namespace.
		cmd := exec.Command("unshare", append([]string{"--net", "--", os.Args[0]}, os.Args[1:]...)...)
		cmd.Env = append(os.Environ(), netnsEnv+"=1")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				os.Exit(exit.ExitCode())
			}
			fmt.Fprintln(os.Stderr, "egress tests: cannot create a network namespace:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(netnsEnv) != "" {
		if err := setupNetns(); err != nil {
			fmt.Fprintln(os.Stderr, "egress tests: set up test network namespace:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// peerNS is the peer namespace (an open /proc/.../ns/net), set once by
// TestMain before any test runs.
var peerNS *os.File

func setupNetns() error {
	ns, err := newNetns()
	if err != nil {
		return err
	}
	peerNS = ns
	peer := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), ns.Fd())
	inPeer := func(c ...string) []string { return append([]string{"nsenter", "--net=" + peer}, c...) }
	cmds := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"sysctl", "-q", "-w", "net.ipv4.ping_group_range=0 2147483647"},
		{"ip", "link", "add", "oxh", "type", "veth", "peer", "name", "oxp", "netns", peer},
		{"ip", "addr", "add", ownV4.String() + "/24", "dev", "oxh"},
		{"ip", "-6", "addr", "add", ownV6.String() + "/64", "dev", "oxh", "nodad"},
		{"ip", "link", "set", "oxh", "up"},
		{"ip", "route", "add", "198.18.0.0/24", "via", peerV4.String()},
		{"ip", "route", "add", "169.254.0.0/16", "via", peerV4.String()},
		{"ip", "-6", "route", "add", hostV6.String() + "/128", "via", peerV6.String()},
		inPeer("ip", "link", "set", "lo", "up"),
		inPeer("ip", "addr", "add", peerV4.String()+"/24", "dev", "oxp"),
		inPeer("ip", "-6", "addr", "add", peerV6.String()+"/64", "dev", "oxp", "nodad"),
		inPeer("ip", "link", "set", "oxp", "up"),
		inPeer("ip", "route", "add", "default", "via", ownV4.String()),
		inPeer("ip", "-6", "route", "add", "default", "via", ownV6.String()),
		inPeer("ip", "-6", "addr", "add", hostV6.String()+"/128", "dev", "lo"),
		inPeer("ip", "addr", "add", metadata.String()+"/32", "dev", "lo"),
		inPeer("ip", "addr", "add", linkLocal.String()+"/32", "dev", "lo"),
	}
	for _, a := range []netip.Addr{hostA, hostB, hostC, hostD, hostE, hostF, hostG} {
		cmds = append(cmds, inPeer("ip", "addr", "add", a.String()+"/32", "dev", "lo"))
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, out)
		}
	}
	return nil
}

// newNetns creates an empty network namespace without a process in it: a
// locked thread unshares, opens its namespace and ends with its goroutine.
func newNetns() (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with us
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("unshare(CLONE_NEWNET): %w", err)}
			return
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		ch <- result{f, err}
	}()
	r := <-ch
	return r.f, r.err
}

// inPeerNS runs f on a thread inside the peer namespace: sockets f creates
// live there for good.
func inPeerNS(t testing.TB, f func()) {
	t.Helper()
	errc := make(chan error)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(peerNS.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter peer namespace: %w", err)
			return
		}
		f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread ends with the goroutine.
			errc <- fmt.Errorf("leave peer namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// fixture is an Enforcer attached to a parent group private to one test.
type fixture struct {
	t       *testing.T
	parent  string
	enf     *Enforcer
	ring    *bpfring.Ring
	mu      sync.Mutex
	events  []Event
	refused []DNSRefusal
	nextID  int
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: cgroup BPF network tests need root (load BPF programs, create cgroups)")
	}
	if os.Getenv(netnsEnv) == "" {
		t.Skip("SKIP: not running inside the test's private network namespace (unshare failed?)")
	}
}

func cgroup2Mount(t testing.TB) string {
	t.Helper()
	mount, err := cgroup.Cgroup2Mount()
	if errors.Is(err, cgroup.ErrNoCgroup2) {
		t.Skipf("SKIP: sessions cannot exist here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return mount
}

func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	requireRoot(t)
	parent := filepath.Join(cgroup2Mount(t), fmt.Sprintf("oxs-egress-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatalf("create test parent cgroup: %v", err)
	}
	t.Cleanup(func() { os.Remove(parent) })
	f := &fixture{parent: parent}
	userRefusal := cfg.Resolver.OnRefusal
	cfg.Resolver.OnRefusal = func(r DNSRefusal) {
		f.mu.Lock()
		f.refused = append(f.refused, r)
		f.mu.Unlock()
		if userRefusal != nil {
			userRefusal(r)
		}
	}
	ring, err := bpfring.Open(bpfring.Options{})
	if err != nil {
		t.Fatalf("open the event ring buffer: %v", err)
	}
	var lost atomic.Uint64
	if _, err := ring.Subscribe(loader.SourceNet, bpfring.Funcs{
		OnRecord: func(_ bpfring.Header, raw []byte) {
			ev, err := DecodeEvent(raw)
			if err != nil {
				t.Errorf("decode a network event: %v", err)
				return
			}
			f.mu.Lock()
			f.events = append(f.events, ev)
			f.mu.Unlock()
		},
		OnLost: func(n uint64) { lost.Add(n) },
	}); err != nil {
		t.Fatal(err)
	}
	cfg.Events = ring.Maps()
	enf, err := Attach(parent, cfg)
	if errors.Is(err, ebpf.ErrNotSupported) {
		ring.Close()
		t.Skipf("SKIP: this kernel cannot load or attach the cgroup network programs: %v", err)
	}
	if err != nil {
		ring.Close()
		t.Fatalf("Attach: %v", err)
	}
	f.enf = enf
	f.ring = ring
	t.Cleanup(func() {
		if err := enf.Close(); err != nil {
			t.Errorf("Enforcer.Close: %v", err)
		}
		if err := ring.Close(); err != nil {
			t.Errorf("close the event ring buffer: %v", err)
		}
		if n := lost.Load(); n != 0 {
			t.Errorf("lost events: %d", n)
		}
	})
	return f
}

// testGroup is a cgroup the test created under the fixture's parent.
type testGroup struct {
	dir  string
	id   uint64
	dirf *os.File
}

// group creates a child group; with n != nil it becomes a session.
func (f *fixture) group(t testing.TB, n *policy.Network) *testGroup {
	t.Helper()
	return f.groupIn(t, f.parent, n)
}

func (f *fixture) groupIn(t testing.TB, parent string, n *policy.Network) *testGroup {
	t.Helper()
	f.nextID++
	dir := filepath.Join(parent, fmt.Sprintf("s%d", f.nextID))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := cgroup.ID(dir)
	if err != nil {
		t.Fatal(err)
	}
	dirf, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &testGroup{dir: dir, id: id, dirf: dirf}
	if n != nil {
		if err := f.enf.AddSession(s.id, *n); err != nil {
			t.Fatalf("AddSession: %v", err)
		}
	}
	t.Cleanup(func() {
		if n != nil {
			if err := f.enf.RemoveSession(s.id); err != nil {
				t.Errorf("RemoveSession: %v", err)
			}
		}
		dirf.Close()
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("cgroup %s not removable", dir)
	})
	return s
}

// helperCmd starts this test binary as a helper inside group s.
func helperCmd(s *testGroup, op string, args ...string) *exec.Cmd {
	cmd := testutil.OpCommand("egress", append([]string{op}, args...)...)
	if s != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(s.dirf.Fd())}
	}
	return cmd
}

func run(t testing.TB, s *testGroup, op string, args ...string) helperResult {
	t.Helper()
	cmd := helperCmd(s, op, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s %v: %v: %s", op, args, err, stderr.String())
	}
	var r helperResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("helper %s %v output %q: %v", op, args, out, err)
	}
	return r
}

// waitEvent waits for an event of cgroup id matching want.
func (f *fixture) waitEvent(t testing.TB, id uint64, want func(Event) bool) (Event, bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		for _, e := range f.events {
			if e.CgroupID == id && want(e) {
				f.mu.Unlock()
				return e, true
			}
		}
		f.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	return Event{}, false
}

func (f *fixture) eventCount(id uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.events {
		if e.CgroupID == id {
			n++
		}
	}
	return n
}

func (f *fixture) waitRefusal(t testing.TB, id uint64, name, reason string) bool {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		for _, r := range f.refused {
			if r.CgroupID == id && r.Name == name && r.Reason == reason {
				f.mu.Unlock()
				return true
			}
		}
		f.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// listen starts TCP echo listeners (outside every session): on loopback
// and unspecified addresses in the host namespace, on the others in the
// peer namespace, where the remote test hosts are.
func listen(t testing.TB, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		var ln net.Listener
		var err error
		if where, perr := netip.ParseAddrPort(a); perr == nil && !where.Addr().IsLoopback() && !where.Addr().IsUnspecified() {
			inPeerNS(t, func() { ln, err = net.Listen("tcp", a) })
		} else {
			ln, err = net.Listen("tcp", a)
		}
		if err != nil {
			t.Fatalf("listen %s: %v", a, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					io.Copy(c, c)
				}()
			}
		}()
	}
}

func ap(a netip.Addr, port uint16) string { return netip.AddrPortFrom(a, port).String() }

func mapped(a netip.Addr) netip.Addr { return netip.AddrFrom16(a.As16()) }

// expectation of one table row: Errno "" means success; otherwise the
// errno and the event that must accompany the refusal.
type netCase struct {
	name   string
	op     string
	args   []string
	errno  string
	evOp   Op
	reason Reason
	dest   string // expected event destination ("" = don't care)
}

func runCases(t *testing.T, f *fixture, s *testGroup, cases []netCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.eventCount(s.id)
			r := run(t, s, tc.op, tc.args...)
			if r.Errno != tc.errno {
				t.Fatalf("%s %v: errno %q (%s), want %q", tc.op, tc.args, r.Errno, r.Err, tc.errno)
			}
			if tc.errno == "" {
				return
			}
			ev, ok := f.waitEvent(t, s.id, func(e Event) bool {
				return e.Op == tc.evOp && e.Reason == tc.reason &&
					(tc.dest == "" || e.Destination.String() == tc.dest)
			})
			if !ok {
				f.mu.Lock()
				since := slices.Clone(f.events[before:])
				f.mu.Unlock()
				t.Fatalf("no %s/%s event for %s (events since: %+v)", tc.evOp, tc.reason, tc.dest, since)
			}
			if ev.PID == 0 || ev.Comm == "" {
				t.Errorf("event lacks the process: %+v", ev)
			}
		})
	}
}

func TestAllowlistIPRules(t *testing.T) {
	f := newFixture(t, Config{})
	listen(t, ap(hostA, 8080), ap(hostA, 8081), ap(hostB, 8080), "[2001:db8::1]:8080", "[2001:db8::1]:7000",
		ap(metadata, 80), ap(hostC, 8080), ap(hostC, 7001), ap(hostC, 7002))
	s := f.group(t, &policy.Network{
		Policy:   policy.NetAllowlist,
		Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{
			{Prefix: netip.PrefixFrom(hostA, 32), Ports: []policy.PortRange{{First: 8080, Last: 8080}}},
			// Nested rules: the /32's ports do not hide the /30's.
			{Prefix: netip.MustParsePrefix("198.18.0.0/30"), Ports: []policy.PortRange{{First: 7000, Last: 7001}}},
			{Prefix: netip.PrefixFrom(hostC, 32), Ports: []policy.PortRange{{First: 8080, Last: 8080}}},
			{Prefix: netip.MustParsePrefix("2001:db8::/64"), Ports: []policy.PortRange{{First: 7000, Last: 7000}}},
		},
	})
	const perm = "EPERM"
	runCases(t, f, s, []netCase{
		{name: "allowed host:port", op: "tcp", args: []string{ap(hostA, 8080)}},
		{name: "mapped form of allowed", op: "tcp", args: []string{"[" + mapped(hostA).String() + "]:8080"}},
		{name: "same host other port", op: "tcp", args: []string{ap(hostA, 8081)}, errno: perm, evOp: OpConnect, reason: ReasonPort, dest: ap(hostA, 8081)},
		{name: "other host", op: "tcp", args: []string{ap(hostE, 8080)}, errno: perm, evOp: OpConnect, reason: ReasonNotAllowed, dest: ap(hostE, 8080)},
		{name: "mapped form of other host", op: "tcp", args: []string{"[" + mapped(hostE).String() + "]:8080"}, errno: perm, evOp: OpConnect, reason: ReasonNotAllowed, dest: ap(hostE, 8080)},
		{name: "ipv6 prefix allowed port", op: "tcp", args: []string{"[2001:db8::1]:7000"}},
		{name: "ipv6 prefix other port", op: "tcp", args: []string{"[2001:db8::1]:8080"}, errno: perm, evOp: OpConnect, reason: ReasonPort, dest: "[2001:db8::1]:8080"},
		{name: "nested: /32 port", op: "tcp", args: []string{ap(hostC, 8080)}},
		{name: "nested: covering /30 port", op: "tcp", args: []string{ap(hostC, 7001)}},
		{name: "nested: neither", op: "tcp", args: []string{ap(hostC, 7002)}, errno: perm, evOp: OpConnect, reason: ReasonPort, dest: ap(hostC, 7002)},
		{name: "udp sendto allowed", op: "udp-sendto", args: []string{ap(hostB, 7000)}},
		{name: "udp sendto", op: "udp-sendto", args: []string{ap(hostE, 9)}, errno: perm, evOp: OpSendmsg, reason: ReasonNotAllowed, dest: ap(hostE, 9)},
		{name: "udp6 sendto mapped", op: "udp-sendto", args: []string{"[" + mapped(hostE).String() + "]:9"}, errno: perm, evOp: OpSendmsg, reason: ReasonNotAllowed, dest: ap(hostE, 9)},
		{name: "connected udp", op: "udp-connect", args: []string{ap(hostE, 9)}, errno: perm, evOp: OpConnect, reason: ReasonNotAllowed, dest: ap(hostE, 9)},
		{name: "tcp fast open", op: "tfo", args: []string{ap(hostE, 8080)}, errno: perm, evOp: OpConnect, reason: ReasonNotAllowed, dest: ap(hostE, 8080)},
		{name: "mptcp allowed", op: "mptcp", args: []string{ap(hostA, 8080)}},
		{name: "mptcp refused", op: "mptcp", args: []string{ap(hostE, 8080)}, errno: perm, evOp: OpConnect, reason: ReasonNotAllowed, dest: ap(hostE, 8080)},
		{name: "raw socket", op: "raw", errno: perm, evOp: OpSockCreate, reason: ReasonRawSocket},
		{name: "ping socket", op: "ping", errno: perm, evOp: OpSockCreate, reason: ReasonRawSocket},
		{name: "ipv6 raw socket", op: "raw6", errno: perm, evOp: OpSockCreate, reason: ReasonRawSocket},
		{name: "ipv6 ping socket", op: "ping6", errno: perm, evOp: OpSockCreate, reason: ReasonRawSocket},
		{name: "metadata", op: "tcp", args: []string{ap(metadata, 80)}, errno: perm, evOp: OpConnect, reason: ReasonGuarded, dest: ap(metadata, 80)},
		{name: "loopback", op: "tcp", args: []string{"127.0.0.1:9"}, errno: perm, evOp: OpConnect, reason: ReasonLoopback, dest: "127.0.0.1:9"},
		{name: "unix socketpair", op: "socketpair"},
	})
}

// The network programs' refusals pass the session's flood-control bucket
// of the shared ring buffer (bpf/events.h): a burst beyond it is counted,
// not sent, and events plus suppressed equal the refusals exactly.
func TestKernelFloodControl(t *testing.T) {
	f := newFixture(t, Config{})
	s := f.group(t, &policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackNone})
	const n, burst = 5000, 100
	if err := f.ring.StartSession(s.id, loader.SourceNet, 1, burst); err != nil {
		t.Fatal(err)
	}
	defer f.ring.EndSession(s.id, loader.SourceNet)
	start := time.Now()
	r := run(t, s, "sendto-burst", ap(hostE, 9), fmt.Sprint(n))
	elapsed := time.Since(start)
	if r.Extra != fmt.Sprint(n) {
		t.Fatalf("refused datagrams: %q of %d (%s %s)", r.Extra, n, r.Errno, r.Err)
	}
	f.ring.Drain()
	c, err := f.ring.Counts(s.id, loader.SourceNet)
	if err != nil {
		t.Fatal(err)
	}
	events := uint64(f.eventCount(s.id))
	t.Logf("%d refusals in %v: %d events, %d suppressed", n, elapsed, events, c.Suppressed)
	if c.Sent != events || events+c.Suppressed != n {
		t.Errorf("sent %d, events read %d, suppressed %d: want sent = read and read + suppressed = %d", c.Sent, events, c.Suppressed, n)
	}
	// One event per second after the burst.
	if most := uint64(burst) + uint64(elapsed.Seconds()) + 2; events < burst || events > most {
		t.Errorf("%d events passed a bucket of burst %d and 1/s over %v: want %d to %d", events, burst, elapsed, burst, most)
	}
	f.mu.Lock()
	var lastSuppressed uint64
	for _, e := range f.events {
		if e.CgroupID == s.id {
			lastSuppressed = max(lastSuppressed, e.Suppressed)
		}
	}
	f.mu.Unlock()
	if lastSuppressed > c.Suppressed {
		t.Errorf("an event carries suppressed %d, more than the final count %d", lastSuppressed, c.Suppressed)
	}
}

// A group the session creates inside itself is still the session.
func TestNestedGroupStaysConfined(t *testing.T) {
	f := newFixture(t, Config{})
	listen(t, ap(hostB, 8080))
	s := f.group(t, &policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackNone})
	child := f.groupIn(t, s.dir, nil)
	r := run(t, child, "tcp", ap(hostB, 8080))
	if r.Errno != "EPERM" {
		t.Fatalf("connect from a group inside the session: %q (%s), want EPERM", r.Errno, r.Err)
	}
	if _, ok := f.waitEvent(t, s.id, func(e Event) bool {
		return e.Reason == ReasonPolicyNone && e.Destination.String() == ap(hostB, 8080)
	}); !ok {
		t.Error("no event attributed to the session")
	}
}

// A socket created in a session and used by a process outside it passes
// the socket hooks (they judge the calling task) but not the egress
// floor, which judges the socket's group.
func TestEgressFloorCatchesPassedSocket(t *testing.T) {
	f := newFixture(t, Config{})
	s := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Prefix: netip.PrefixFrom(hostA, 32)}}})
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours := os.NewFile(uintptr(fds[0]), "ours")
	theirs := os.NewFile(uintptr(fds[1]), "theirs")
	defer ours.Close()
	cmd := helperCmd(s, "udp-socket-fd")
	cmd.ExtraFiles = []*os.File{theirs}
	out, err := cmd.Output()
	theirs.Close()
	if err != nil {
		t.Fatalf("helper: %v %s", err, out)
	}
	buf := make([]byte, 16)
	oob := make([]byte, syscall.CmsgSpace(4))
	_, oobn, _, _, err := syscall.Recvmsg(fds[0], buf, oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control message: %v %d", err, len(msgs))
	}
	passed, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(passed) != 1 {
		t.Fatalf("passed fd: %v", err)
	}
	defer syscall.Close(passed[0])

	allowed := &syscall.SockaddrInet4{Addr: hostA.As4(), Port: 9}
	if err := syscall.Sendto(passed[0], []byte("x"), 0, allowed); err != nil {
		t.Errorf("sendto allowed %s through the passed socket: %v", hostA, err)
	}
	refused := &syscall.SockaddrInet4{Addr: hostB.As4(), Port: 9}
	err = syscall.Sendto(passed[0], []byte("x"), 0, refused)
	if !errors.Is(err, syscall.EPERM) {
		t.Fatalf("sendto %s through the passed socket: %v, want EPERM", hostB, err)
	}
	if _, ok := f.waitEvent(t, s.id, func(e Event) bool {
		return e.Op == OpSkbEgress && e.Reason == ReasonNotAllowed && e.Destination.String() == ap(hostB, 9)
	}); !ok {
		t.Error("no egress floor event")
	}
}

// io_uring's IORING_OP_CONNECT does not go through connect(2); the cgroup
// hooks must judge it all the same.
func TestIOUringConnect(t *testing.T) {
	f := newFixture(t, Config{})
	listen(t, ap(hostA, 8080), ap(hostB, 8080))
	s := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Prefix: netip.PrefixFrom(hostA, 32)}}})
	if r := run(t, nil, "uring-connect", ap(hostA, 8080)); r.Errno == "uring-unavailable" {
		t.Skipf("SKIP: io_uring is unavailable to this process, io_uring connects cannot be tested: %s", r.Err)
	}
	runCases(t, f, s, []netCase{
		{name: "allowed", op: "uring-connect", args: []string{ap(hostA, 8080)}},
		{name: "refused", op: "uring-connect", args: []string{ap(hostB, 8080)}, errno: "EPERM", evOp: OpConnect, reason: ReasonNotAllowed, dest: ap(hostB, 8080)},
	})
}

func TestPolicyModes(t *testing.T) {
	f := newFixture(t, Config{})
	listen(t, ap(hostB, 8080), ap(metadata, 80))
	none := f.group(t, &policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackNone})
	full := f.group(t, &policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackNone})
	fullMeta := f.group(t, &policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Prefix: netip.PrefixFrom(metadata, 32)}}})
	wide := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}}})
	outside := f.group(t, nil)

	const perm = "EPERM"
	t.Run("none", func(t *testing.T) {
		runCases(t, f, none, []netCase{
			{name: "tcp", op: "tcp", args: []string{ap(hostB, 8080)}, errno: perm, evOp: OpConnect, reason: ReasonPolicyNone, dest: ap(hostB, 8080)},
			{name: "udp", op: "udp-sendto", args: []string{ap(hostB, 9)}, errno: perm, evOp: OpSendmsg, reason: ReasonPolicyNone, dest: ap(hostB, 9)},
			{name: "dns", op: "udp-sendto", args: []string{ap(hostB, 53)}, errno: perm, evOp: OpSendmsg, reason: ReasonPolicyNone, dest: ap(hostB, 53)},
			{name: "socketpair", op: "socketpair"},
		})
	})
	t.Run("full", func(t *testing.T) {
		runCases(t, f, full, []netCase{
			{name: "any host", op: "tcp", args: []string{ap(hostB, 8080)}},
			{name: "raw", op: "raw"},
			{name: "metadata still guarded", op: "tcp", args: []string{ap(metadata, 80)}, errno: perm, evOp: OpConnect, reason: ReasonGuarded, dest: ap(metadata, 80)},
		})
	})
	t.Run("full with metadata listed", func(t *testing.T) {
		runCases(t, f, fullMeta, []netCase{{name: "metadata", op: "tcp", args: []string{ap(metadata, 80)}}})
	})
	t.Run("0.0.0.0/0 does not list metadata", func(t *testing.T) {
		runCases(t, f, wide, []netCase{
			{name: "any host", op: "tcp", args: []string{ap(hostB, 8080)}},
			{name: "metadata", op: "tcp", args: []string{ap(metadata, 80)}, errno: perm, evOp: OpConnect, reason: ReasonGuarded, dest: ap(metadata, 80)},
		})
	})
	t.Run("outside any session", func(t *testing.T) {
		for _, op := range []string{"tcp", "raw"} {
			if r := run(t, outside, op, ap(hostB, 8080)); r.Errno != "" {
				t.Errorf("%s from a non-session group: %s", op, r.Err)
			}
		}
		if n := f.eventCount(outside.id); n != 0 {
			t.Errorf("%d events for a non-session group", n)
		}
		if r := run(t, nil, "tcp", ap(hostB, 8080)); r.Errno != "" {
			t.Errorf("tcp from outside the parent: %s", r.Err)
		}
	})
}

func TestLoopback(t *testing.T) {
	f := newFixture(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	foreign := ln.Addr().String()
	const perm = "EPERM"
	for _, tc := range []struct {
		loopback      policy.Loopback
		foreign, self string
	}{
		{policy.LoopbackNone, perm, perm},
		{policy.LoopbackSession, perm, ""},
		{policy.LoopbackAll, "", ""},
	} {
		t.Run(string(tc.loopback), func(t *testing.T) {
			s := f.group(t, &policy.Network{Policy: policy.NetNone, Loopback: tc.loopback})
			c := []netCase{
				{name: "foreign listener", op: "tcp", args: []string{foreign}, errno: tc.foreign, evOp: OpConnect, reason: ReasonLoopback, dest: foreign},
				{name: "session's own listener", op: "listen-connect", errno: tc.self, evOp: OpConnect, reason: ReasonLoopback},
				{name: "session's own udp server", op: "udp-loopback-echo", errno: tc.self, evOp: OpSendmsg, reason: ReasonLoopback},
			}
			runCases(t, f, s, c)
		})
	}
}

// A session's server answers clients outside the session, and a port the
// session closed stops being the session's once someone else binds it.
func TestLoopbackSessionServerAndStalePort(t *testing.T) {
	f := newFixture(t, Config{})
	s := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackSession})

	t.Run("server replies to an outside client", func(t *testing.T) {
		cmd := helperCmd(s, "serve-once", "127.0.0.1:0")
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cmd.Process.Kill() // after a failure it may still wait for a client
			cmd.Wait()
		}()
		lines := bufio.NewScanner(stdout)
		var r helperResult
		if !lines.Scan() || json.Unmarshal(lines.Bytes(), &r) != nil || r.Errno != "" {
			t.Fatalf("server did not start: %+v", r)
		}
		c, err := net.DialTimeout("tcp", r.Extra, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		echo, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || echo != "hello\n" {
			t.Fatalf("echo from the session's server: %q, %v", echo, err)
		}
	})

	t.Run("re-bound port is not the session's", func(t *testing.T) {
		r := run(t, s, "listen-close")
		if r.Errno != "" {
			t.Fatal(r.Err)
		}
		ln, err := net.Listen("tcp", r.Extra)
		if err != nil {
			t.Skipf("SKIP: cannot re-bind %s for the stale-port check: %v", r.Extra, err)
		}
		defer ln.Close()
		runCases(t, f, s, []netCase{{name: "connect", op: "tcp", args: []string{r.Extra}, errno: "EPERM",
			evOp: OpConnect, reason: ReasonLoopback, dest: r.Extra}})
	})
}

// testZone is the upstream the resolver forwards to in tests.
func testZone(t testing.TB) string {
	t.Helper()
	records := map[string][]string{
		"example.test.":        {"example.test. 60 IN A 198.18.0.1"},
		"api.example.test.":    {"api.example.test. 60 IN A 198.18.0.2"},
		"a.b.example.test.":    {"a.b.example.test. 60 IN A 198.18.0.3"},
		"evil-example.test.":   {"evil-example.test. 60 IN A 198.18.0.4"},
		"test.":                {"test. 60 IN A 198.18.0.5"},
		"x.y.deep.test.":       {"x.y.deep.test. 60 IN A 198.18.0.2"},
		"deep.test.":           {"deep.test. 60 IN A 198.18.0.3"},
		"cdn.example.test.":    {"cdn.example.test. 60 IN CNAME edge.cdn.test."},
		"edge.cdn.test.":       {"edge.cdn.test. 60 IN A 198.18.0.6"},
		"rebind.example.test.": {"rebind.example.test. 60 IN A 127.0.0.1"},
		"short.example.test.":  {"short.example.test. 1 IN A 198.18.0.7"},
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		rrs, ok := records[strings.ToLower(q.Name)]
		if !ok {
			m.Rcode = dns.RcodeNameError
		}
		for _, s := range rrs {
			rr, err := dns.NewRR(s)
			if err != nil {
				panic(err)
			}
			if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == dns.TypeCNAME {
				m.Answer = append(m.Answer, rr)
			}
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

func TestHostnameRules(t *testing.T) {
	upstream := testZone(t)
	f := newFixture(t, Config{Resolver: ResolverConfig{Upstream: []string{upstream}}})
	listen(t, ap(hostA, 8080), ap(hostB, 8080), ap(hostC, 8080), ap(hostD, 8080), ap(hostE, 8080), ap(hostF, 8080))
	port := []policy.PortRange{{First: 8080, Last: 8080}}
	s := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone, MinTTLSeconds: 30,
		Allow: []policy.NetRule{
			{Host: "example.test", Ports: port},
			{Host: "*.example.test", Ports: port},
			{Host: "**.deep.test", Ports: port},
		}})

	for _, tc := range []struct {
		name    string
		query   string
		refused bool   // REFUSED by the resolver
		ip      string // address it has upstream
	}{
		{"exact", "example.test", false, "198.18.0.1"},
		{"case and trailing dot", "EXAMPLE.Test.", false, "198.18.0.1"},
		{"one label wildcard", "api.example.test", false, "198.18.0.2"},
		{"cname to unlisted name", "cdn.example.test", false, "198.18.0.6"},
		{"any depth wildcard", "x.y.deep.test", false, "198.18.0.2"},
		{"two labels under *.", "a.b.example.test", true, "198.18.0.3"},
		{"lookalike", "evil-example.test", true, "198.18.0.4"},
		{"parent domain", "test", true, "198.18.0.5"},
		{"apex of **.", "deep.test", true, "198.18.0.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, s, "resolve-connect", tc.query, "8080")
			if tc.refused {
				if r.Extra != "lookup" {
					t.Fatalf("lookup %s succeeded (%v), want REFUSED", tc.query, r.Addrs)
				}
				if !f.waitRefusal(t, s.id, normalizeName(tc.query), "not-allowed") {
					t.Errorf("no refusal record for %s", tc.query)
				}
				// Its address was not admitted by the refused lookup. (The
				// listed names may share it; only check unshared ones.)
				if tc.ip == "198.18.0.4" || tc.ip == "198.18.0.5" {
					c := run(t, s, "tcp", tc.ip+":8080")
					if c.Errno != "EPERM" {
						t.Errorf("connect to %s after refused lookup: %q, want EPERM", tc.ip, c.Errno)
					}
				}
				return
			}
			if r.Extra == "lookup" || r.Errno != "" {
				t.Fatalf("resolve-connect %s: %s (%s)", tc.query, r.Errno, r.Err)
			}
			if !slices.Equal(r.Addrs, []string{tc.ip}) {
				t.Errorf("addresses %v, want [%s]", r.Addrs, tc.ip)
			}
		})
	}

	t.Run("rebinding", func(t *testing.T) {
		r := run(t, s, "resolve-connect", "rebind.example.test", "8080")
		if r.Extra != "lookup" {
			t.Fatalf("rebinding answer was served: %+v", r)
		}
		if !f.waitRefusal(t, s.id, "rebind.example.test", "rebinding") {
			t.Error("no rebinding refusal record")
		}
	})
	for _, tc := range []struct{ network, server, from string }{
		{"udp4", "192.0.2.53:53", "192.0.2.53:53"},
		{"udp6", "[2001:db8::53]:53", "[2001:db8::53]:53"},
		// Dual-stack socket, mapped server (Go reports the source unmapped).
		{"udp", "[::ffff:192.0.2.53]:53", "192.0.2.53:53"},
	} {
		t.Run("unconnected "+tc.network+" query to "+tc.server, func(t *testing.T) {
			r := run(t, s, "dns-sendto", tc.server, "example.test", tc.network)
			if r.Errno != "" {
				t.Fatalf("query: %s", r.Err)
			}
			// recvmsg must make the reply come from the server asked.
			if r.Extra != "NOERROR "+tc.from || !slices.Equal(r.Addrs, []string{"198.18.0.1"}) {
				t.Errorf("answer %q %v, want NOERROR from %s with 198.18.0.1", r.Extra, r.Addrs, tc.from)
			}
		})
	}
	t.Run("tcp query", func(t *testing.T) {
		r := run(t, s, "dns-sendto", "192.0.2.53:53", "api.example.test", "tcp")
		if r.Errno != "" || !strings.HasPrefix(r.Extra, "NOERROR") || !slices.Equal(r.Addrs, []string{"198.18.0.2"}) {
			t.Errorf("tcp query: %+v", r)
		}
	})
	t.Run("admitted port only", func(t *testing.T) {
		c := run(t, s, "tcp", ap(hostA, 8081))
		if c.Errno != "EPERM" {
			t.Errorf("resolved host on another port: %q, want EPERM", c.Errno)
		}
		if name, ok := f.enf.Hostname(s.id, hostA); !ok || name != "example.test" {
			t.Errorf("Hostname(%s) = %q, %v; want example.test", hostA, name, ok)
		}
		if name, ok := f.enf.Hostname(s.id, hostD); ok {
			t.Errorf("Hostname of an address no allowed name admitted: %q", name)
		}
	})

	empty := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone})
	t.Run("empty allowlist refuses dns", func(t *testing.T) {
		r := run(t, empty, "resolve-connect", "example.test", "8080")
		if r.Extra != "lookup" {
			t.Fatalf("lookup succeeded with an empty allowlist: %+v", r)
		}
		if !f.waitRefusal(t, empty.id, "example.test", "not-allowed") {
			t.Error("no refusal record")
		}
	})
}

func TestResolverTTLExpiry(t *testing.T) {
	upstream := testZone(t)
	f := newFixture(t, Config{Resolver: ResolverConfig{Upstream: []string{upstream}}})
	listen(t, ap(hostG, 8080))
	s := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Host: "short.example.test"}}})

	cmd := helperCmd(s, "resolve-hold", "short.example.test", "8080")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	next := func() helperResult {
		if !lines.Scan() {
			t.Fatalf("helper ended early: %v", lines.Err())
		}
		var r helperResult
		json.Unmarshal(lines.Bytes(), &r)
		return r
	}
	if r := next(); r.Errno != "" {
		stdin.Close()
		t.Fatalf("first connect: %+v", r)
	}
	time.Sleep(2500 * time.Millisecond) // TTL 1s, no floor
	if r := run(t, s, "tcp", ap(hostG, 8080)); r.Errno != "EPERM" {
		t.Errorf("connect after expiry, before sweeping: %+v, want EPERM", r)
	}
	if _, ok := f.waitEvent(t, s.id, func(e Event) bool {
		return e.Reason == ReasonExpired && e.Destination.String() == ap(hostG, 8080)
	}); !ok {
		t.Error("no expired-entry event")
	}
	// Sweeping removes the expired entry, so the open connection below
	// survives on its socket state alone.
	if err := f.enf.sweep(); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if n := f.enf.objs.NetAllow.Iterate(); n != nil {
		var k, v []byte
		count := 0
		for n.Next(&k, &v) {
			count++
		}
		if count != 0 {
			t.Errorf("%d allow entries left after sweeping the only (expired) one", count)
		}
	}
	stdin.Write([]byte("go\n"))
	stdin.Close()
	if r := next(); r.Errno != "" {
		t.Errorf("open connection after expiry: %+v, want it to keep working", r)
	}
	if r := next(); r.Errno != "EPERM" {
		t.Errorf("new connection after expiry: %+v, want EPERM", r)
	}
	if _, ok := f.waitEvent(t, s.id, func(e Event) bool {
		// Swept, so no entry covers it any more.
		return e.Reason == ReasonNotAllowed && e.Destination.String() == ap(hostG, 8080)
	}); !ok {
		t.Error("no refusal event for the expired address")
	}
}

func TestAddSessionRejectsBadInput(t *testing.T) {
	f := newFixture(t, Config{})
	for _, tc := range []struct {
		name string
		n    policy.Network
	}{
		{"bad policy", policy.Network{Policy: "some"}},
		{"reversed ports", policy.Network{Policy: policy.NetAllowlist, Allow: []policy.NetRule{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Ports: []policy.PortRange{{First: 9, Last: 1}}}}}},
		{"prefix and host", policy.Network{Policy: policy.NetAllowlist, Allow: []policy.NetRule{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Host: "a.test"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := f.enf.AddSession(424242, tc.n); err == nil {
				t.Fatal("AddSession accepted bad input")
			}
			if f.enf.sessions[424242] != nil {
				t.Error("half-built session left behind")
			}
		})
	}
}

// An allow entry the policy lists for a loopback address admits exactly
// that address and port, whatever the loopback setting; wide prefixes and
// resolver answers never open loopback.
func TestLoopbackExplicitAllowEntry(t *testing.T) {
	f := newFixture(t, Config{})
	listen(t, "127.0.0.2:8080", "127.0.0.2:8081", "127.0.0.1:8080", "[::1]:8080", "[::1]:8081")
	s := f.group(t, &policy.Network{
		Policy:   policy.NetAllowlist,
		Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{
			{Prefix: netip.MustParsePrefix("127.0.0.2/32"), Ports: []policy.PortRange{{First: 8080, Last: 8080}}},
			{Prefix: netip.MustParsePrefix("::1/128"), Ports: []policy.PortRange{{First: 8080, Last: 8080}}},
			{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Ports: []policy.PortRange{{First: 8081, Last: 8081}}},
		},
	})
	full := f.group(t, &policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackNone})
	const perm = "EPERM"
	runCases(t, f, s, []netCase{
		{name: "listed loopback address:port", op: "tcp", args: []string{"127.0.0.2:8080"}},
		{name: "listed, mapped form", op: "tcp", args: []string{"[::ffff:127.0.0.2]:8080"}},
		{name: "listed ::1 port", op: "tcp", args: []string{"[::1]:8080"}},
		{name: "listed address other port", op: "tcp", args: []string{"127.0.0.2:8081"}, errno: perm, evOp: OpConnect, reason: ReasonLoopback, dest: "127.0.0.2:8081"},
		{name: "::1 other port", op: "tcp", args: []string{"[::1]:8081"}, errno: perm, evOp: OpConnect, reason: ReasonLoopback, dest: "[::1]:8081"},
		{name: "other loopback address", op: "tcp", args: []string{"127.0.0.1:8080"}, errno: perm, evOp: OpConnect, reason: ReasonLoopback, dest: "127.0.0.1:8080"},
		{name: "0.0.0.0 as destination", op: "tcp", args: []string{"0.0.0.0:8080"}, errno: perm, evOp: OpConnect, reason: ReasonLoopback, dest: "0.0.0.0:8080"},
		{name: "udp to listed address other port", op: "udp-sendto", args: []string{"127.0.0.2:9"}, errno: perm, evOp: OpSendmsg, reason: ReasonLoopback, dest: "127.0.0.2:9"},
	})
	t.Run("full mode", func(t *testing.T) {
		runCases(t, f, full, []netCase{
			{name: "loopback still judged by the loopback setting", op: "tcp", args: []string{"127.0.0.2:8080"}, errno: perm, evOp: OpConnect, reason: ReasonLoopback, dest: "127.0.0.2:8080"},
			{name: "metadata through NAT64", op: "tcp", args: []string{"[64:ff9b::a9fe:a9fe]:80"}, errno: perm, evOp: OpConnect, reason: ReasonGuarded, dest: "[64:ff9b::a9fe:a9fe]:80"},
		})
	})
}

// An IPv4 loose source route (IP_OPTIONS, no privilege needed) makes the
// header destination the route's first hop while connect() names an
// allowed address: the connect hook judges the allowed one, so the floor
// must judge what the packet really carries, and drop it.
func TestSourceRouteCaughtByFloor(t *testing.T) {
	f := newFixture(t, Config{})
	listen(t, ap(hostA, 8080), ap(hostE, 8080))
	s := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Prefix: netip.PrefixFrom(hostA, 32), Ports: []policy.PortRange{{First: 8080, Last: 8080}}}}})
	// The receiving side drops source-routed packets anyway
	// (accept_source_route=0), so a failed connect proves nothing by
	// itself: the floor's event for the hop is what shows the packet never
	// left the session.
	before := f.eventCount(s.id)
	r := run(t, s, "tcp-lsrr", ap(hostA, 8080), hostE.String())
	if r.Errno == "" {
		t.Fatalf("connect to %s routed through %s succeeded: the floor let a refused header destination out", ap(hostA, 8080), hostE)
	}
	if _, ok := f.waitEvent(t, s.id, func(e Event) bool {
		return e.Op == OpSkbEgress && e.Destination.Addr() == hostE
	}); !ok {
		f.mu.Lock()
		defer f.mu.Unlock()
		t.Fatalf("connect failed with %s but no egress-floor event for the hop %s (events: %+v)", r.Err, hostE, f.events[before:])
	}
}

// hostService starts a TCP service of this host bound to the unspecified
// address (every address of the host, IPv4 and IPv6), outside every
// session, and returns its port.
func hostService(t testing.TB) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// A destination that is one of this host's own addresses is loopback,
// whatever its value: a service bound to 0.0.0.0 must not become
// reachable through the address of an interface because the policy
// admits that address (or everything, under full).
func TestHostOwnAddressesAreLoopback(t *testing.T) {
	f := newFixture(t, Config{})
	svc := hostService(t)
	listen(t, ap(hostA, 8080), ap(peerV4, 8080), "["+peerV6.String()+"]:8080")
	// The allow list covers the host's veth addresses and the peer's.
	subnets := []policy.NetRule{
		{Prefix: netip.MustParsePrefix("198.19.0.0/24")},
		{Prefix: netip.MustParsePrefix("2001:db8:1::/64")},
		{Prefix: netip.PrefixFrom(hostA, 32)},
	}
	own := ap(ownV4, svc)
	own6 := netip.AddrPortFrom(ownV6, svc).String()
	const perm = "EPERM"
	refused := func(name, op, dest string, evOp Op) netCase {
		return netCase{name: name, op: op, args: []string{dest}, errno: perm, evOp: evOp, reason: ReasonLoopback, dest: dest}
	}

	t.Run("allowlist, loopback none", func(t *testing.T) {
		s := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone, Allow: subnets})
		runCases(t, f, s, []netCase{
			refused("own ipv4 address", "tcp", own, OpConnect),
			refused("own ipv6 address", "tcp", own6, OpConnect),
			{name: "own address, mapped form", op: "tcp", args: []string{"[" + mapped(ownV4).String() + "]:" + fmt.Sprint(svc)},
				errno: perm, evOp: OpConnect, reason: ReasonLoopback, dest: own},
			refused("udp sendto own address", "udp-sendto", ap(ownV4, 9), OpSendmsg),
			refused("udp6 sendto own address", "udp-sendto", netip.AddrPortFrom(ownV6, 9).String(), OpSendmsg),
			refused("connected udp to own address", "udp-connect", ap(ownV4, 9), OpConnect),
			refused("subnet broadcast", "udp-broadcast", ap(netip.MustParseAddr("198.19.0.255"), 9), OpSendmsg),
			refused("limited broadcast", "udp-broadcast", ap(netip.MustParseAddr("255.255.255.255"), 9), OpSendmsg),
			{name: "remote in the same subnet", op: "tcp", args: []string{ap(peerV4, 8080)}},
			{name: "remote ipv6 in the same subnet", op: "tcp", args: []string{"[" + peerV6.String() + "]:8080"}},
			{name: "remote host", op: "tcp", args: []string{ap(hostA, 8080)}},
			{name: "udp sendto remote", op: "udp-sendto", args: []string{ap(peerV4, 9)}},
		})
	})
	t.Run("full, loopback none", func(t *testing.T) {
		s := f.group(t, &policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackNone})
		runCases(t, f, s, []netCase{
			refused("own ipv4 address", "tcp", own, OpConnect),
			refused("own ipv6 address", "tcp", own6, OpConnect),
			refused("udp sendto own address", "udp-sendto", ap(ownV4, 9), OpSendmsg),
			{name: "remote host", op: "tcp", args: []string{ap(hostA, 8080)}},
		})
	})
	t.Run("loopback all", func(t *testing.T) {
		s := f.group(t, &policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackAll})
		runCases(t, f, s, []netCase{
			{name: "own ipv4 address", op: "tcp", args: []string{own}},
			{name: "own ipv6 address", op: "tcp", args: []string{own6}},
			{name: "udp sendto own address", op: "udp-sendto", args: []string{ap(ownV4, 9)}},
			{name: "remote still refused", op: "tcp", args: []string{ap(peerV4, 8080)}, errno: perm, evOp: OpConnect,
				reason: ReasonPolicyNone, dest: ap(peerV4, 8080)},
		})
	})
	t.Run("loopback session", func(t *testing.T) {
		s := f.group(t, &policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackSession})
		runCases(t, f, s, []netCase{
			{name: "own server through own address", op: "listen-via", args: []string{"0.0.0.0:0", ownV4.String()}},
			{name: "own server through own ipv6 address", op: "listen-via", args: []string{"[::]:0", ownV6.String()}},
			refused("host's server through own address", "tcp", own, OpConnect),
		})
	})
	t.Run("explicit entry for the address", func(t *testing.T) {
		s := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone, Allow: append(subnets,
			policy.NetRule{Prefix: netip.PrefixFrom(ownV4, 32), Ports: []policy.PortRange{{First: svc, Last: svc}}})})
		runCases(t, f, s, []netCase{
			{name: "listed address:port", op: "tcp", args: []string{own}},
			refused("listed address, other port", "udp-sendto", ap(ownV4, 9), OpSendmsg),
			refused("unlisted own ipv6 address", "tcp", own6, OpConnect),
		})
	})
}

// The socket hooks learn the host's addresses from rtnetlink; the egress
// floor does not need to: whatever leaves over lo is local. A missing map
// entry (an address a moment old) is still refused, by the floor.
func TestHostOwnAddressFloor(t *testing.T) {
	f := newFixture(t, Config{})
	s := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Prefix: netip.MustParsePrefix("198.19.0.0/24")}, {Prefix: netip.MustParsePrefix("2001:db8:1::/64")}}})
	for _, own := range []netip.Addr{ownV4, ownV6} {
		t.Run(own.String(), func(t *testing.T) {
			key := localKey(netip.PrefixFrom(own, own.BitLen()))
			var v uint8
			if err := f.enf.objs.NetLocal.Lookup(&key, &v); err != nil {
				t.Fatalf("%s (the host's veth address) is not in net_local: %v", own, err)
			}
			// The watcher believes the address is known, so it will not
			// put it back: the hooks see a remote, allowed destination.
			if err := f.enf.objs.NetLocal.Delete(&key); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.enf.objs.NetLocal.Put(&key, uint8(1)) })
			dest := netip.AddrPortFrom(own, 9).String()
			r := run(t, s, "udp-sendto", dest)
			if r.Errno != "EPERM" {
				t.Fatalf("sendto %s with the address missing from net_local: %q (%s), want EPERM from the floor", dest, r.Errno, r.Err)
			}
			if _, ok := f.waitEvent(t, s.id, func(e Event) bool {
				return e.Op == OpSkbEgress && e.Reason == ReasonLoopback && e.Destination.String() == dest
			}); !ok {
				t.Error("no egress-floor loopback event")
			}
		})
	}
}

// An address (or AnyIP prefix) added while sessions run is judged as the
// host's at once (within the time rtnetlink takes), and stops being so
// once removed.
func TestHostAddressesTracked(t *testing.T) {
	f := newFixture(t, Config{})
	svc := hostService(t)
	s := f.group(t, &policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackNone})
	for _, tc := range []struct {
		name      string
		add, del  []string
		probe     netip.Addr
		localBits int
	}{
		{"interface address", []string{"addr", "add", "10.77.0.1/32", "dev", "oxh"}, []string{"addr", "del", "10.77.0.1/32", "dev", "oxh"},
			netip.MustParseAddr("10.77.0.1"), 32},
		{"anyip prefix", []string{"route", "add", "local", "10.88.0.0/16", "dev", "lo"}, []string{"route", "del", "local", "10.88.0.0/16", "dev", "lo"},
			netip.MustParseAddr("10.88.3.4"), 16},
		{"ipv6 address", []string{"-6", "addr", "add", "2001:db8:77::1/128", "dev", "oxh", "nodad"}, []string{"-6", "addr", "del", "2001:db8:77::1/128", "dev", "oxh"},
			netip.MustParseAddr("2001:db8:77::1"), 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ipCmd := func(args []string) {
				t.Helper()
				if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
					t.Fatalf("ip %v: %v: %s", args, err, out)
				}
			}
			waitLocal := func(want bool) {
				t.Helper()
				key := localKey(netip.PrefixFrom(tc.probe, tc.probe.BitLen()))
				var v uint8
				for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if (f.enf.objs.NetLocal.Lookup(&key, &v) == nil) == want {
						return
					}
				}
				t.Fatalf("net_local covers %s: %v after 3s, want %v", tc.probe, !want, want)
			}
			ipCmd(tc.add)
			removed := false
			t.Cleanup(func() {
				if !removed {
					exec.Command("ip", tc.del...).Run()
				}
			})
			waitLocal(true)
			dest := netip.AddrPortFrom(tc.probe, svc).String()
			runCases(t, f, s, []netCase{{name: "connect", op: "tcp", args: []string{dest}, errno: "EPERM",
				evOp: OpConnect, reason: ReasonLoopback, dest: dest}})
			ipCmd(tc.del)
			removed = true
			waitLocal(false)
		})
	}
}

// Each allowlist session has its own resolver on a loopback port. Another
// session must not reach it, not with loopback = all and not with an
// allow entry for 127.0.0.1: the resolver would answer (and admit) under
// the other session's policy.
func TestResolverUnreachableFromOtherSessions(t *testing.T) {
	upstream := testZone(t)
	f := newFixture(t, Config{Resolver: ResolverConfig{Upstream: []string{upstream}}})
	owner := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Host: "example.test"}}})
	f.enf.mu.Lock()
	addrs := f.enf.sessions[owner.id].dns.Addrs()
	f.enf.mu.Unlock()
	udp4, tcp4 := addrs.UDP4.String(), addrs.TCP4.String()
	any4 := netip.AddrPortFrom(netip.IPv4Unspecified(), addrs.TCP4.Port()).String()

	t.Run("owner reaches its resolver directly", func(t *testing.T) {
		r := run(t, owner, "dns-sendto", udp4, "example.test", "udp4")
		if r.Errno != "" || !strings.HasPrefix(r.Extra, "NOERROR") {
			t.Fatalf("query to the own resolver %s: %+v", udp4, r)
		}
	})
	others := map[string]*policy.Network{
		"loopback all":            {Policy: policy.NetFull, Loopback: policy.LoopbackAll},
		"allowlist with 127/8":    {Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone, Allow: []policy.NetRule{{Prefix: netip.MustParsePrefix("127.0.0.0/8")}}},
		"allowlist, loopback all": {Policy: policy.NetAllowlist, Loopback: policy.LoopbackAll, Allow: []policy.NetRule{{Host: "example.test"}}},
	}
	for name, n := range others {
		t.Run(name, func(t *testing.T) {
			s := f.group(t, n)
			cases := []netCase{
				{name: "udp query", op: "dns-sendto", args: []string{udp4, "example.test", "udp4"}, errno: "EPERM", evOp: OpSendmsg, reason: ReasonResolver, dest: udp4},
				{name: "tcp connect", op: "tcp", args: []string{tcp4}, errno: "EPERM", evOp: OpConnect, reason: ReasonResolver, dest: tcp4},
				{name: "through 0.0.0.0", op: "tcp", args: []string{any4}, errno: "EPERM", evOp: OpConnect, reason: ReasonResolver, dest: any4},
			}
			if addrs.TCP6.IsValid() {
				cases = append(cases, netCase{name: "tcp6 connect", op: "tcp", args: []string{addrs.TCP6.String()},
					errno: "EPERM", evOp: OpConnect, reason: ReasonResolver, dest: addrs.TCP6.String()})
			}
			if n.Loopback == policy.LoopbackAll {
				// Loopback = all still means all the rest of loopback.
				cases = append(cases, netCase{name: "loopback otherwise open", op: "tcp", args: []string{upstreamTCP(t)}})
			}
			runCases(t, f, s, cases)
		})
	}
	t.Run("listener entries leave with the session", func(t *testing.T) {
		gone := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
			Allow: []policy.NetRule{{Host: "example.test"}}})
		if err := f.enf.RemoveSession(gone.id); err != nil {
			t.Fatal(err)
		}
		if err := f.enf.AddSession(gone.id, policy.Network{Policy: policy.NetNone}); err != nil { // for the cleanup
			t.Fatal(err)
		}
		it := f.enf.objs.NetResolvers.Iterate()
		var k loader.NetListenerKey
		var id uint64
		for it.Next(&k, &id) {
			if id == gone.id {
				t.Errorf("resolver listener %v of a removed session still guarded", k)
			}
		}
	})
}

// upstreamTCP returns a TCP listener on 127.0.0.1 outside every session.
func upstreamTCP(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// Link-local addresses are guarded like the metadata service: refused
// unless an allow entry at least as specific as 169.254.0.0/16 lists
// them, under full too.
func TestLinkLocalGuarded(t *testing.T) {
	f := newFixture(t, Config{})
	listen(t, ap(linkLocal, 8080))
	full := f.group(t, &policy.Network{Policy: policy.NetFull, Loopback: policy.LoopbackNone})
	wide := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}, {Prefix: netip.MustParsePrefix("169.0.0.0/8")}}})
	listed := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Prefix: netip.MustParsePrefix("169.254.0.0/16"), Ports: []policy.PortRange{{First: 8080, Last: 8080}}}}})
	guarded := func(op string, evOp Op) netCase {
		return netCase{name: op, op: op, args: []string{ap(linkLocal, 8080)}, errno: "EPERM", evOp: evOp, reason: ReasonGuarded, dest: ap(linkLocal, 8080)}
	}
	t.Run("full", func(t *testing.T) {
		runCases(t, f, full, []netCase{guarded("tcp", OpConnect), guarded("udp-sendto", OpSendmsg)})
	})
	t.Run("wider prefixes", func(t *testing.T) {
		runCases(t, f, wide, []netCase{guarded("tcp", OpConnect), guarded("udp-sendto", OpSendmsg)})
	})
	t.Run("listed", func(t *testing.T) {
		runCases(t, f, listed, []netCase{
			{name: "listed port", op: "tcp", args: []string{ap(linkLocal, 8080)}},
			{name: "other port", op: "udp-sendto", args: []string{ap(linkLocal, 9)}, errno: "EPERM", evOp: OpSendmsg, reason: ReasonPort, dest: ap(linkLocal, 9)},
		})
	})
}

// An empty allowlist refuses every destination, DNS included; whether
// proxy variables are set or unset changes nothing, because the kernel
// judges the connection and not the program's choice of route.
func TestEmptyAllowlistAndProxyVariables(t *testing.T) {
	upstream := testZone(t)
	f := newFixture(t, Config{Resolver: ResolverConfig{Upstream: []string{upstream}}})
	listen(t, ap(hostA, 8080), ap(hostB, 3128))
	empty := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone})
	proxied := f.group(t, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Prefix: netip.PrefixFrom(hostB, 32), Ports: []policy.PortRange{{First: 3128, Last: 3128}}}}})
	proxyVars := []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "NO_PROXY", "no_proxy"}
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"proxy variables set", []string{"HTTP_PROXY=http://" + ap(hostB, 3128), "https_proxy=http://" + ap(hostB, 3128), "ALL_PROXY=socks5://" + ap(hostB, 3128), "NO_PROXY=*"}},
		{"proxy variables unset", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range []*testGroup{empty, proxied} {
				for _, c := range []struct{ op, dest string }{{"tcp", ap(hostA, 8080)}, {"udp-sendto", ap(hostA, 9)}, {"http-direct", ap(hostA, 8080)}} {
					cmd := helperCmd(s, c.op, c.dest)
					env := cmd.Env[:0:0]
					for _, kv := range cmd.Env {
						if name, _, _ := strings.Cut(kv, "="); !slices.Contains(proxyVars, name) {
							env = append(env, kv)
						}
					}
					cmd.Env = append(env, tc.env...)
					out, err := cmd.Output()
					if err != nil {
						t.Fatalf("helper %s: %v", c.op, err)
					}
					var r helperResult
					if err := json.Unmarshal(out, &r); err != nil {
						t.Fatalf("helper %s output %q: %v", c.op, out, err)
					}
					if r.Errno != "EPERM" {
						t.Errorf("%s %s: %q (%s), want EPERM", c.op, c.dest, r.Errno, r.Err)
					}
				}
			}
		})
	}
	t.Run("dns", func(t *testing.T) {
		r := run(t, empty, "dns-sendto", "192.0.2.53:53", "example.test", "udp4")
		if r.Errno != "" || !strings.HasPrefix(r.Extra, "REFUSED") || len(r.Addrs) != 0 {
			t.Errorf("query with an empty allowlist: %+v, want REFUSED without answers", r)
		}
		if !f.waitRefusal(t, empty.id, "example.test", "not-allowed") {
			t.Error("no refusal record")
		}
	})
}
