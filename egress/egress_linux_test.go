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
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/policy"
)

const netnsEnv = "OXS_EGRESS_NETNS"

// Test addresses are extra addresses of lo inside a network namespace
// private to this test binary, so no test traffic can leave it. They are
// not loopback addresses to the programs (not 127/8 or ::1).
var (
	hostA    = netip.MustParseAddr("198.18.0.1")
	hostB    = netip.MustParseAddr("198.18.0.2")
	hostC    = netip.MustParseAddr("198.18.0.3")
	hostD    = netip.MustParseAddr("198.18.0.4")
	hostE    = netip.MustParseAddr("198.18.0.5")
	hostF    = netip.MustParseAddr("198.18.0.6")
	hostG    = netip.MustParseAddr("198.18.0.7")
	hostV6   = netip.MustParseAddr("2001:db8::1")
	metadata = netip.MustParseAddr("169.254.169.254")
)

func TestMain(m *testing.M) {
	if op := os.Getenv(helperEnv); op != "" {
		os.Exit(runHelper(op))
	}
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

func setupNetns() error {
	cmds := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "-6", "addr", "add", hostV6.String() + "/128", "dev", "lo"},
		{"ip", "addr", "add", metadata.String() + "/32", "dev", "lo"},
		{"sysctl", "-q", "-w", "net.ipv4.ping_group_range=0 2147483647"},
	}
	for _, a := range []netip.Addr{hostA, hostB, hostC, hostD, hostE, hostF, hostG} {
		cmds = append(cmds, []string{"ip", "addr", "add", a.String() + "/32", "dev", "lo"})
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(c, " "), err, out)
		}
	}
	return nil
}

// fixture is an Enforcer attached to a parent group private to one test.
type fixture struct {
	t       *testing.T
	parent  string
	enf     *Enforcer
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
	enf, err := Attach(parent, cfg)
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("SKIP: this kernel cannot load or attach the cgroup network programs: %v", err)
	}
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	f.enf = enf
	rd, err := enf.Events()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := rd.Read()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.events = append(f.events, ev)
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if lost, err := rd.Lost(); err != nil || lost != 0 {
			t.Errorf("lost events: %d, %v", lost, err)
		}
		rd.Close()
		<-done
		if err := enf.Close(); err != nil {
			t.Errorf("Enforcer.Close: %v", err)
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
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+op, argsEnv+"="+string(a))
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

// listen starts TCP echo listeners (outside every session).
func listen(t testing.TB, addrs ...string) {
	t.Helper()
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
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
				t.Fatalf("no %s/%s event for %s (events since: %+v)", tc.evOp, tc.reason, tc.dest, f.events[before:])
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
		{name: "metadata", op: "tcp", args: []string{ap(metadata, 80)}, errno: perm, evOp: OpConnect, reason: ReasonGuarded, dest: ap(metadata, 80)},
		{name: "loopback", op: "tcp", args: []string{"127.0.0.1:9"}, errno: perm, evOp: OpConnect, reason: ReasonLoopback, dest: "127.0.0.1:9"},
		{name: "unix socketpair", op: "socketpair"},
	})
	rd, err := f.enf.Events()
	if err == nil {
		t.Error("a second event reader opened; records would be split between readers")
		rd.Close()
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
