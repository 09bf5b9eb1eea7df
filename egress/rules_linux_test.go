//go:build linux

package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
)

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
