//go:build linux

package egress

import (
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
		testutil.Serve(t, ln, func(c net.Conn) {
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		})
	}
}

// closingListener listens on TCP addr outside every session and closes
// each connection it accepts: a destination that only has to exist.
func closingListener(tb testing.TB, addr string) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	return testutil.Serve(tb, ln, nil)
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
