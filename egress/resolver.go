package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/openoxide/oxsupervise/policy"
)

// AdmitFunc makes addr, an answer for the allowed name, reachable for a
// session on ports for ttl.
type AdmitFunc func(cgroupID uint64, name string, addr netip.Addr, ports []policy.PortRange, ttl time.Duration) error

// ResolverConfig configures the resolver.
type ResolverConfig struct {
	// Upstream lists recursive resolvers as host:port. Empty means the
	// nameservers of /etc/resolv.conf.
	Upstream []string
	// Timeout bounds one upstream exchange; 0 means 3s.
	Timeout time.Duration
	// OnRefusal, when set, receives every refused query (for audit).
	OnRefusal func(DNSRefusal)
	// OnAnswer, when set, receives every query answered NOERROR or
	// NXDOMAIN for a name the session may resolve (for metrics: answers
	// leave no audit record). It is called before the answer is sent. A
	// query reaches OnAnswer or OnRefusal, never both; neither hears of a
	// malformed query (not one question of opcode QUERY: REFUSED) or of
	// an answer whose addresses could not be admitted (SERVFAIL).
	OnAnswer func(DNSAnswer)
	// MaxInflight bounds the upstream lookups one session may have
	// outstanding (default 64); queries beyond it get SERVFAIL at once.
	// Without a bound a session flooding random names under an allowed
	// wildcard would pile up a goroutine and a socket per query in the
	// root supervisor for as long as upstream takes to time out.
	MaxInflight int
	// Ask is the approver of names no rule allows, for sessions whose
	// policy says unknown_hosts = "ask" (see AskFunc). Nil means nobody
	// can approve: such names are refused at once (reason no-approver).
	Ask AskFunc
}

// Resolver answers a session's DNS for the names its policy allows and
// admits the answers into the session's allow entries. Everything else is
// REFUSED; when the upstream fails the answer is SERVFAIL, never an
// unchecked address (fail closed).
type Resolver struct {
	cfg   ResolverConfig
	admit AdmitFunc
	// ask is cfg.Ask, replaceable by SetAsk while sessions run.
	ask atomic.Pointer[AskFunc]
}

// NewResolver returns a resolver that calls admit for every address it
// answers with.
func NewResolver(cfg ResolverConfig, admit AdmitFunc) *Resolver {
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = 64
	}
	r := &Resolver{cfg: cfg, admit: admit}
	r.SetAsk(cfg.Ask)
	return r
}

// ResolverAddrs are a session resolver's listeners; IPv6 ones are invalid
// when ::1 is unavailable.
type ResolverAddrs struct {
	UDP4, TCP4, UDP6, TCP6 netip.AddrPort
}

// SessionResolver serves one session's queries on its own loopback ports,
// which is how it knows whose query it answers.
type SessionResolver struct {
	r        *Resolver
	cgroupID uint64
	net      policy.Network
	addrs    ResolverAddrs
	servers  []*dns.Server
	wg       sync.WaitGroup
	inflight chan struct{} // one token per outstanding upstream lookup
	asks     askState
}

// Start opens the session's listeners on 127.0.0.1 (and ::1 when
// available) at kernel-chosen ports and serves them until Close.
func (r *Resolver) Start(cgroupID uint64, n policy.Network) (*SessionResolver, error) {
	// Fail now, not at the first query, when there is no upstream.
	if _, err := r.upstream(); err != nil {
		return nil, err
	}
	s := &SessionResolver{r: r, cgroupID: cgroupID, net: n, inflight: make(chan struct{}, r.cfg.MaxInflight)}
	udp4, tcp4, err := listenPair("127.0.0.1")
	if err != nil {
		return nil, fmt.Errorf("start session resolver: %w", err)
	}
	s.serve(udp4, nil)
	s.serve(nil, tcp4)
	s.addrs.UDP4 = udp4.LocalAddr().(*net.UDPAddr).AddrPort()
	s.addrs.TCP4 = tcp4.Addr().(*net.TCPAddr).AddrPort()
	if udp6, tcp6, err := listenPair("::1"); err == nil {
		s.serve(udp6, nil)
		s.serve(nil, tcp6)
		s.addrs.UDP6 = udp6.LocalAddr().(*net.UDPAddr).AddrPort()
		s.addrs.TCP6 = tcp6.Addr().(*net.TCPAddr).AddrPort()
	}
	return s, nil
}

func listenPair(host string) (net.PacketConn, net.Listener, error) {
	pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, nil, fmt.Errorf("listen udp %s: %w", host, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		pc.Close()
		return nil, nil, fmt.Errorf("listen tcp %s: %w", host, err)
	}
	return pc, ln, nil
}

func (s *SessionResolver) serve(pc net.PacketConn, ln net.Listener) {
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Listener: ln, Handler: s, NotifyStartedFunc: func() { close(started) }}
	s.servers = append(s.servers, srv)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		srv.ActivateAndServe()
	}()
	// Shutdown before the server runs would leave its goroutine behind.
	<-started
}

// Addrs returns the listeners the session's port-53 traffic is sent to.
func (s *SessionResolver) Addrs() ResolverAddrs { return s.addrs }

// Close refuses the queries held for an approval and stops the listeners.
func (s *SessionResolver) Close() error {
	s.asks.close()
	var errs []error
	for _, srv := range s.servers {
		if err := srv.Shutdown(); err != nil {
			errs = append(errs, err)
		}
	}
	s.wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop session resolver: %w", err)
	}
	return nil
}

func (r *Resolver) upstream() ([]string, error) {
	if len(r.cfg.Upstream) > 0 {
		return r.cfg.Upstream, nil
	}
	cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil {
		return nil, fmt.Errorf("resolver upstream: %w", err)
	}
	if len(cc.Servers) == 0 {
		return nil, fmt.Errorf("resolver upstream: no nameserver in /etc/resolv.conf")
	}
	out := make([]string, 0, len(cc.Servers))
	for _, srv := range cc.Servers {
		out = append(out, net.JoinHostPort(srv, cc.Port))
	}
	return out, nil
}

// ServeDNS answers one query of the session.
func (s *SessionResolver) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.RecursionAvailable = true
	client, _ := netip.ParseAddrPort(w.RemoteAddr().String())
	if req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 {
		resp.Rcode = dns.RcodeRefused
		w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	name := normalizeName(q.Name)
	refuse := func(reason string, addr netip.Addr) {
		resp.Rcode = dns.RcodeRefused
		resp.Answer = nil
		if s.r.cfg.OnRefusal != nil {
			s.r.cfg.OnRefusal(DNSRefusal{CgroupID: s.cgroupID, Name: name, Type: dns.TypeToString[q.Qtype],
				Reason: reason, Address: addr, Client: client})
		}
		w.WriteMsg(resp)
	}
	answer := func() {
		if s.r.cfg.OnAnswer != nil {
			s.r.cfg.OnAnswer(DNSAnswer{CgroupID: s.cgroupID, Result: answerResult(resp)})
		}
		w.WriteMsg(resp)
	}
	if q.Qclass != dns.ClassINET {
		refuse("not-allowed", netip.Addr{})
		return
	}
	ports, ok := matchHost(s.net.Allow, name)
	if !ok {
		// Names approved for this session (unknown_hosts = "ask") reach
		// every port, like an allow entry without ports.
		ports = nil
		if reason := s.approve(name, q.Qtype, client); reason != "" {
			refuse(reason, netip.Addr{})
			return
		}
	}
	if q.Qtype != dns.TypeA && q.Qtype != dns.TypeAAAA {
		// An allowed name, but no record type that admits an address:
		// answer "no data" instead of carrying arbitrary payloads.
		answer()
		return
	}
	select {
	case s.inflight <- struct{}{}:
		defer func() { <-s.inflight }()
	default:
		resp.Rcode = dns.RcodeServerFailure
		if s.r.cfg.OnRefusal != nil {
			s.r.cfg.OnRefusal(DNSRefusal{CgroupID: s.cgroupID, Name: name, Type: dns.TypeToString[q.Qtype],
				Reason: "busy", Client: client})
		}
		w.WriteMsg(resp)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.r.cfg.Timeout)
	defer cancel()
	rcode, chain, err := s.r.resolve(ctx, q.Name, q.Qtype)
	if err != nil {
		resp.Rcode = dns.RcodeServerFailure
		if s.r.cfg.OnRefusal != nil {
			s.r.cfg.OnRefusal(DNSRefusal{CgroupID: s.cgroupID, Name: name, Type: dns.TypeToString[q.Qtype],
				Reason: "upstream", Client: client})
		}
		w.WriteMsg(resp)
		return
	}
	resp.Rcode = rcode
	for _, rr := range chain {
		if addr, ok := rrAddr(rr); ok {
			if allowed, _ := rebindingAllowed(addr, s.net.Allow); !allowed {
				refuse("rebinding", addr)
				return
			}
		}
	}
	for _, rr := range chain {
		addr, ok := rrAddr(rr)
		if !ok {
			continue
		}
		ttl := admitTTL(rr.Header().Ttl, s.net)
		if err := s.r.admit(s.cgroupID, name, addr, ports, ttl); err != nil {
			resp.Rcode = dns.RcodeServerFailure
			resp.Answer = nil
			w.WriteMsg(resp)
			return
		}
	}
	resp.Answer = chain
	answer()
}

// answerResult classifies an answer the resolver sends: the response
// itself is what was decided.
func answerResult(m *dns.Msg) AnswerResult {
	if m.Rcode == dns.RcodeNameError {
		return AnswerNXDomain
	}
	for _, rr := range m.Answer {
		if _, ok := rrAddr(rr); ok {
			return AnswerAddresses
		}
	}
	return AnswerNoData
}

// admitTTL is how long an answer with ttl seconds keeps its address
// admitted: at least the policy's floor (so that a TTL of 0 still lets the
// client connect), at most its cap (so that a huge TTL cannot keep an
// address reachable for days). The cap wins over the floor.
func admitTTL(ttl uint32, n policy.Network) time.Duration {
	d := max(time.Duration(ttl)*time.Second, time.Duration(n.MinTTLSeconds)*time.Second)
	if n.MaxTTLSeconds > 0 {
		d = min(d, time.Duration(n.MaxTTLSeconds)*time.Second)
	}
	return d
}

func rrAddr(rr dns.RR) (netip.Addr, bool) {
	switch v := rr.(type) {
	case *dns.A:
		a, ok := netip.AddrFromSlice(v.A.To4())
		return a, ok
	case *dns.AAAA:
		a, ok := netip.AddrFromSlice(v.AAAA.To16())
		return a, ok
	}
	return netip.Addr{}, false
}

// maxCNAMEHops bounds CNAME chasing (loops, long chains).
const maxCNAMEHops = 8

// resolve asks upstream for name/qtype and follows the CNAME chain,
// returning the chain's CNAMEs and the final name's addresses of qtype.
func (r *Resolver) resolve(ctx context.Context, name string, qtype uint16) (int, []dns.RR, error) {
	upstream, err := r.upstream()
	if err != nil {
		return 0, nil, err
	}
	var chain []dns.RR
	target := dns.Fqdn(name)
	seen := map[string]bool{}
	for hop := 0; hop < maxCNAMEHops; hop++ {
		m, err := r.exchange(ctx, upstream, target, qtype)
		if err != nil {
			return 0, nil, err
		}
		if m.Rcode != dns.RcodeSuccess {
			if m.Rcode == dns.RcodeNameError {
				return dns.RcodeNameError, chain, nil
			}
			return 0, nil, fmt.Errorf("upstream answered %s for %s", dns.RcodeToString[m.Rcode], target)
		}
		// Walk the answer section along the chain as far as it goes.
		for {
			if seen[strings.ToLower(target)] {
				return 0, nil, fmt.Errorf("CNAME loop at %s", target)
			}
			seen[strings.ToLower(target)] = true
			var next string
			var addrs []dns.RR
			for _, rr := range m.Answer {
				if !strings.EqualFold(rr.Header().Name, target) {
					continue
				}
				switch v := rr.(type) {
				case *dns.CNAME:
					next = v.Target
					chain = append(chain, rr)
				case *dns.A, *dns.AAAA:
					if rr.Header().Rrtype == qtype {
						addrs = append(addrs, rr)
					}
				}
			}
			if len(addrs) > 0 || next == "" {
				return dns.RcodeSuccess, append(chain, addrs...), nil
			}
			target = next
			if !answerHas(m, target) {
				break // ask upstream for the CNAME target
			}
		}
	}
	return 0, nil, fmt.Errorf("more than %d CNAME hops from %s", maxCNAMEHops, name)
}

func answerHas(m *dns.Msg, name string) bool {
	for _, rr := range m.Answer {
		if strings.EqualFold(rr.Header().Name, name) {
			return true
		}
	}
	return false
}

func (r *Resolver) exchange(ctx context.Context, upstream []string, name string, qtype uint16) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.RecursionDesired = true
	var errs []error
	for _, server := range upstream {
		c := &dns.Client{Net: "udp", Timeout: r.cfg.Timeout}
		m, _, err := c.ExchangeContext(ctx, q, server)
		if err == nil && m.Truncated {
			c.Net = "tcp"
			m, _, err = c.ExchangeContext(ctx, q, server)
		}
		if err == nil {
			return m, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", server, err))
	}
	return nil, fmt.Errorf("resolve %s: %w", name, errors.Join(errs...))
}
