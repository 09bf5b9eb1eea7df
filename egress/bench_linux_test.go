//go:build linux

package egress

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/openoxide/oxsupervise/policy"
)

// BenchmarkConnectLatency measures connect()+close() from a process
// outside the parent group (no program runs), from a group under the
// parent that is not a session (programs run, find no session), and from
// a session (full judgement), and reports the ratios: to a loopback
// listener (loopback = all), and to a remote host over the test's veth
// that an allow entry admits (trie walk plus the host-address check, the
// common case).
func BenchmarkConnectLatency(b *testing.B) {
	f := newFixture(b, Config{})
	ln := closingListener(b, "127.0.0.1:0")
	listen(b, ap(hostA, 8080))
	plain := f.group(b, nil)
	for _, tc := range []struct {
		name   string
		target string
		net    policy.Network
	}{
		{"loopback", ln.Addr().String(), policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackAll}},
		{"remote-allowed", ap(hostA, 8080), policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
			Allow: []policy.NetRule{{Prefix: netip.MustParsePrefix("198.18.0.0/16")}, {Prefix: netip.PrefixFrom(hostA, 32), Ports: []policy.PortRange{{First: 8080, Last: 8080}}}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			sess := f.group(b, &tc.net)
			n := strconv.Itoa(max(b.N, 200))
			measure := func(g *testGroup) float64 {
				r := run(b, g, "bench-connect", tc.target, n)
				if r.Errno != "" {
					b.Fatalf("bench-connect: %s", r.Err)
				}
				ns, err := strconv.ParseFloat(r.Extra, 64)
				if err != nil {
					b.Fatal(err)
				}
				return ns
			}
			// Interleave rounds and keep each mode's best, so load from
			// other processes on the machine skews all three alike.
			base, nonSession, session := 1e18, 1e18, 1e18
			b.ResetTimer()
			for round := 0; round < 5; round++ {
				base = min(base, measure(nil))
				nonSession = min(nonSession, measure(plain))
				session = min(session, measure(sess))
			}
			b.StopTimer()
			b.ReportMetric(base, "baseline-ns/connect")
			b.ReportMetric(session, "session-ns/connect")
			b.ReportMetric(nonSession/base, "non-session/baseline")
			b.ReportMetric(session/base, "session/baseline")
		})
	}
}

// BenchmarkResolverLatency compares a query answered by the upstream
// directly with the same query through a session's resolver (policy match,
// forward, rebinding check, trie write).
func BenchmarkResolverLatency(b *testing.B) {
	upstream := testZone(b)
	f := newFixture(b, Config{Resolver: ResolverConfig{Upstream: []string{upstream}}})
	g := f.group(b, &policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackNone,
		Allow: []policy.NetRule{{Host: "example.test"}}})
	f.enf.mu.Lock()
	resolver := f.enf.sessions[g.id].dns.Addrs().UDP4.String()
	f.enf.mu.Unlock()
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	q := new(dns.Msg)
	q.SetQuestion("example.test.", dns.TypeA)
	measure := func(server string) float64 {
		start := time.Now()
		for i := 0; i < b.N; i++ {
			m, _, err := c.Exchange(q, server)
			if err != nil || len(m.Answer) != 1 {
				b.Fatalf("query %s: %v %v", server, err, m)
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(b.N)
	}
	direct, via := 1e18, 1e18
	b.ResetTimer()
	for round := 0; round < 5; round++ {
		direct = min(direct, measure(upstream))
		via = min(via, measure(resolver))
	}
	b.StopTimer()
	b.ReportMetric(direct, "upstream-ns/query")
	b.ReportMetric(via, "resolver-ns/query")
	b.ReportMetric(via/direct, "resolver/upstream")
}
