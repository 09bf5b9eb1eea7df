//go:build linux

package egress

import (
	"bufio"
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
)

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
	return closingListener(t, "127.0.0.1:0").Addr().String()
}
