package egress

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/openoxide/oxsupervise/policy"
)

// recordingWriter is a dns.ResponseWriter that keeps the reply.
type recordingWriter struct {
	mu    sync.Mutex
	reply *dns.Msg
}

func (w *recordingWriter) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}
func (w *recordingWriter) RemoteAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (w *recordingWriter) WriteMsg(m *dns.Msg) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reply = m
	return nil
}
func (w *recordingWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *recordingWriter) Close() error                { return nil }
func (w *recordingWriter) TsigStatus() error           { return nil }
func (w *recordingWriter) TsigTimersOnly(bool)         {}
func (w *recordingWriter) Hijack()                     {}

// A session flooding lookups of an allowed wildcard at an upstream that
// never answers gets at most MaxInflight lookups outstanding; the rest
// fail at once with SERVFAIL and a "busy" refusal, instead of each holding
// a goroutine and a socket of the supervisor until upstream times out.
func TestResolverBoundsOutstandingLookups(t *testing.T) {
	// An upstream that receives and never answers (loopback only).
	blackhole, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("SKIP: no loopback UDP socket for the fake upstream: %v", err)
	}
	defer blackhole.Close()
	const limit, queries = 4, 12
	var mu sync.Mutex
	reasons := map[string]int{}
	r := NewResolver(ResolverConfig{
		Upstream:    []string{blackhole.LocalAddr().String()},
		Timeout:     300 * time.Millisecond,
		MaxInflight: limit,
		OnRefusal: func(d DNSRefusal) {
			mu.Lock()
			reasons[d.Reason]++
			mu.Unlock()
		},
	}, nil)
	s := &SessionResolver{r: r, cgroupID: 1, net: policy.Network{Policy: policy.NetAllowlist,
		Allow: []policy.NetRule{{Host: "**.flood.test"}}}, inflight: make(chan struct{}, limit)}

	var wg sync.WaitGroup
	start := time.Now()
	fastFails := make(chan time.Duration, queries)
	for i := range queries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := new(dns.Msg)
			q.SetQuestion(dns.Fqdn(string(rune('a'+i))+".flood.test"), dns.TypeA)
			w := &recordingWriter{}
			s.ServeDNS(w, q)
			if w.reply == nil || w.reply.Rcode != dns.RcodeServerFailure {
				t.Errorf("query %d: reply %v, want SERVFAIL", i, w.reply)
			}
			fastFails <- time.Since(start)
		}()
	}
	wg.Wait()
	close(fastFails)
	if reasons["busy"] != queries-limit || reasons["upstream"] != limit {
		t.Fatalf("refusals %v: want %d busy and %d upstream", reasons, queries-limit, limit)
	}
	fast := 0
	for d := range fastFails {
		if d < 250*time.Millisecond {
			fast++
		}
	}
	if fast < queries-limit {
		t.Errorf("only %d replies before the upstream timeout, want the %d over the limit at once", fast, queries-limit)
	}
	if len(s.inflight) != 0 {
		t.Errorf("%d lookup tokens still held after every query finished", len(s.inflight))
	}
}
