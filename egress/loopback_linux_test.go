//go:build linux

package egress

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/policy"
)

func TestLoopback(t *testing.T) {
	f := newFixture(t, Config{})
	ln := closingListener(t, "127.0.0.1:0")
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

// hostService starts a TCP service of this host bound to the unspecified
// address (every address of the host, IPv4 and IPv6), outside every
// session, and returns its port.
func hostService(t testing.TB) uint16 {
	t.Helper()
	return uint16(closingListener(t, ":0").Addr().(*net.TCPAddr).Port)
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
