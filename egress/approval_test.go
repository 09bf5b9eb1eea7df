package egress

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/openoxide/oxsupervise/policy"
)

// fakeUpstream answers every A query on loopback with addr and ttl.
func fakeUpstream(t *testing.T, addr netip.Addr, ttl uint32) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("SKIP: no loopback UDP socket for the fake upstream: %v", err)
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) },
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(req)
			if req.Question[0].Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA,
					Class: dns.ClassINET, Ttl: ttl}, A: addr.AsSlice()})
			}
			w.WriteMsg(m)
		})}
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

// admitted records the resolver's admissions.
type admitted struct {
	mu   sync.Mutex
	ttls map[netip.Addr]time.Duration
	all  map[netip.Addr][]policy.PortRange
}

func (a *admitted) admit(_ uint64, _ string, addr netip.Addr, ports []policy.PortRange, ttl time.Duration) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ttls[addr] = ttl
	a.all[addr] = ports
	return nil
}

func (a *admitted) ttl(addr netip.Addr) (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d, ok := a.ttls[addr]
	return d, ok
}

// refusals records DNSRefusal reasons.
type refusals struct {
	mu      sync.Mutex
	reasons []string
}

func (r *refusals) add(d DNSRefusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, d.Name+":"+d.Reason)
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reasons...)
}

func query(s *SessionResolver, name string, qtype uint16) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	w := &recordingWriter{}
	s.ServeDNS(w, q)
	return w.reply
}

// TestAdmitTTL: the floor lifts tiny TTLs, the cap cuts huge ones, and
// the cap wins when the two disagree.
func TestAdmitTTL(t *testing.T) {
	tests := []struct {
		name          string
		ttl, min, max uint32
		want          time.Duration
	}{
		{"floor", 0, 30, 3600, 30 * time.Second},
		{"as answered", 300, 30, 3600, 300 * time.Second},
		{"capped", 86400 * 7, 30, 3600, time.Hour},
		{"no cap", 86400, 30, 0, 86400 * time.Second},
		{"cap below floor", 5, 120, 60, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := admitTTL(tt.ttl, policy.Network{MinTTLSeconds: tt.min, MaxTTLSeconds: tt.max})
			if got != tt.want {
				t.Errorf("admitTTL(%d, min %d, max %d) = %v, want %v", tt.ttl, tt.min, tt.max, got, tt.want)
			}
		})
	}
}

// An upstream answer with a week-long TTL is admitted for the policy's
// cap, not for the week.
func TestResolverCapsTTL(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.7")
	up := fakeUpstream(t, addr, 7*86400)
	ad := &admitted{ttls: map[netip.Addr]time.Duration{}, all: map[netip.Addr][]policy.PortRange{}}
	r := NewResolver(ResolverConfig{Upstream: []string{up}, Timeout: 2 * time.Second}, ad.admit)
	s := &SessionResolver{r: r, cgroupID: 1, inflight: make(chan struct{}, 4), net: policy.Network{Policy: policy.NetAllowlist,
		Allow: []policy.NetRule{{Host: "cap.test"}}, MinTTLSeconds: 30, MaxTTLSeconds: 600}}
	m := query(s, "cap.test", dns.TypeA)
	if m == nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("reply %v, want one answer", m)
	}
	if got, ok := ad.ttl(addr); !ok || got != 600*time.Second {
		t.Fatalf("admitted for %v (%v), want the 600s cap", got, ok)
	}
}

// The ask path of unknown_hosts = "ask": the approver's once, always and
// reject decide the answer; concurrent queries for one name are one
// approval; always is remembered for the session; a silent approver runs
// into the policy's timeout; without an approver, or in deny mode, nothing
// waits.
func TestResolverAsk(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.9")
	up := fakeUpstream(t, addr, 60)
	var mu sync.Mutex
	asked := map[string]int{}
	replies := map[string]AskReply{"once.test": AskOnce, "always.test": AskAlways, "no.test": AskReject}
	approver := func(ctx context.Context, q HostnameAsk) (AskReply, string) {
		mu.Lock()
		asked[q.Name]++
		mu.Unlock()
		if q.Name == "slow.test" {
			<-ctx.Done() // never answers in time
			return AskOnce, ""
		}
		// Let concurrent queries join the held one.
		time.Sleep(100 * time.Millisecond)
		return replies[q.Name], ""
	}
	newSession := func(t *testing.T, mode policy.UnknownHosts, ask AskFunc) (*SessionResolver, *admitted, *refusals) {
		ad := &admitted{ttls: map[netip.Addr]time.Duration{}, all: map[netip.Addr][]policy.PortRange{}}
		rf := &refusals{}
		r := NewResolver(ResolverConfig{Upstream: []string{up}, Timeout: 2 * time.Second, OnRefusal: rf.add, Ask: ask}, ad.admit)
		s := &SessionResolver{r: r, cgroupID: 1, inflight: make(chan struct{}, 8), net: policy.Network{Policy: policy.NetAllowlist,
			Allow: []policy.NetRule{{Host: "listed.test", Ports: []policy.PortRange{{First: 443, Last: 443}}}}, MinTTLSeconds: 1,
			UnknownHosts: mode, AskTimeoutSeconds: 1}}
		return s, ad, rf
	}

	t.Run("once", func(t *testing.T) {
		s, ad, _ := newSession(t, policy.UnknownHostsAsk, approver)
		var wg sync.WaitGroup
		rcodes := make([]int, 3)
		for i := range rcodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if m := query(s, "once.test", dns.TypeA); m != nil {
					rcodes[i] = m.Rcode
				} else {
					rcodes[i] = -1
				}
			}()
		}
		wg.Wait()
		for i, rc := range rcodes {
			if rc != dns.RcodeSuccess {
				t.Errorf("query %d: rcode %d, want NOERROR", i, rc)
			}
		}
		mu.Lock()
		n := asked["once.test"]
		mu.Unlock()
		if n != 1 {
			t.Errorf("asked %d times for three concurrent queries, want once", n)
		}
		if _, ok := ad.ttl(addr); !ok || ad.all[addr] != nil {
			t.Errorf("approved answer not admitted on every port: %v %v", ok, ad.all[addr])
		}
		// Once means once: the next query asks again.
		query(s, "once.test", dns.TypeA)
		mu.Lock()
		n = asked["once.test"]
		mu.Unlock()
		if n != 2 {
			t.Errorf("a later query after once asked %d times in all, want 2", n)
		}
	})
	t.Run("always", func(t *testing.T) {
		s, _, _ := newSession(t, policy.UnknownHostsAsk, approver)
		for range 3 {
			if m := query(s, "always.test", dns.TypeA); m == nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
				t.Fatalf("reply %v, want an answer", m)
			}
		}
		mu.Lock()
		n := asked["always.test"]
		mu.Unlock()
		if n != 1 {
			t.Errorf("asked %d times, want once: always holds for the session", n)
		}
	})
	t.Run("reject", func(t *testing.T) {
		s, ad, rf := newSession(t, policy.UnknownHostsAsk, approver)
		if m := query(s, "no.test", dns.TypeA); m == nil || m.Rcode != dns.RcodeRefused || len(m.Answer) != 0 {
			t.Fatalf("reply %v, want REFUSED", m)
		}
		if _, ok := ad.ttl(addr); ok {
			t.Error("a rejected name's address was admitted")
		}
		if got := rf.list(); len(got) != 1 || got[0] != "no.test:"+ReasonAskRejected {
			t.Errorf("refusals %v", got)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		s, _, rf := newSession(t, policy.UnknownHostsAsk, approver)
		start := time.Now()
		m := query(s, "slow.test", dns.TypeA)
		if took := time.Since(start); took < 900*time.Millisecond || took > 3*time.Second {
			t.Errorf("held for %v, want about the 1s ask timeout", took)
		}
		if m == nil || m.Rcode != dns.RcodeRefused {
			t.Fatalf("reply %v, want REFUSED", m)
		}
		if got := rf.list(); len(got) != 1 || got[0] != "slow.test:"+ReasonAskTimeout {
			t.Errorf("refusals %v", got)
		}
	})
	t.Run("no approver", func(t *testing.T) {
		s, _, rf := newSession(t, policy.UnknownHostsAsk, nil)
		start := time.Now()
		if m := query(s, "once.test", dns.TypeA); m == nil || m.Rcode != dns.RcodeRefused {
			t.Fatalf("reply %v, want REFUSED", m)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("refusal took %v: nothing may wait without an approver", took)
		}
		if got := rf.list(); len(got) != 1 || got[0] != "once.test:"+ReasonNoApprover {
			t.Errorf("refusals %v", got)
		}
	})
	t.Run("deny mode never asks", func(t *testing.T) {
		mu.Lock()
		before := len(asked)
		mu.Unlock()
		s, _, rf := newSession(t, policy.UnknownHostsDeny, approver)
		if m := query(s, "fresh.test", dns.TypeA); m == nil || m.Rcode != dns.RcodeRefused {
			t.Fatalf("reply %v, want REFUSED", m)
		}
		if got := rf.list(); len(got) != 1 || got[0] != "fresh.test:not-allowed" {
			t.Errorf("refusals %v", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(asked) != before {
			t.Errorf("deny mode asked the approver: %v", asked)
		}
	})
	t.Run("other types are not asked", func(t *testing.T) {
		s, _, rf := newSession(t, policy.UnknownHostsAsk, approver)
		if m := query(s, "txt.test", dns.TypeTXT); m == nil || m.Rcode != dns.RcodeRefused {
			t.Fatalf("reply %v, want REFUSED", m)
		}
		if got := rf.list(); len(got) != 1 || got[0] != "txt.test:not-allowed" {
			t.Errorf("refusals %v", got)
		}
	})
	t.Run("close ends held queries", func(t *testing.T) {
		s, _, rf := newSession(t, policy.UnknownHostsAsk, func(ctx context.Context, q HostnameAsk) (AskReply, string) {
			<-ctx.Done()
			return AskReject, ReasonAskTimeout
		})
		s.net.AskTimeoutSeconds = 60
		done := make(chan *dns.Msg)
		go func() { done <- query(s, "held.test", dns.TypeA) }()
		time.Sleep(100 * time.Millisecond)
		s.asks.close()
		select {
		case m := <-done:
			if m == nil || m.Rcode != dns.RcodeRefused {
				t.Fatalf("reply %v, want REFUSED", m)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("a held query outlived the session resolver's close")
		}
		if got := rf.list(); len(got) != 1 || got[0] != "held.test:"+ReasonAskClosed {
			t.Errorf("refusals %v", got)
		}
	})
	t.Run("listed names are not asked", func(t *testing.T) {
		mu.Lock()
		before := len(asked)
		mu.Unlock()
		s, _, _ := newSession(t, policy.UnknownHostsAsk, approver)
		if m := query(s, "listed.test", dns.TypeA); m == nil || m.Rcode != dns.RcodeSuccess {
			t.Fatalf("reply %v, want NOERROR", m)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(asked) != before {
			t.Errorf("a listed name was asked: %v", asked)
		}
	})
}
