package egress

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/openoxide/oxsupervise/policy"
)

// HostnameAsk is a query the resolver holds for an approval: the session's
// policy says unknown_hosts = "ask" and no allow entry matches Name.
type HostnameAsk struct {
	CgroupID uint64
	// Name is lower-case, without trailing dot.
	Name string
	// Type is the first query type that asked (A or AAAA); the answer
	// covers both.
	Type   string
	Client netip.AddrPort
}

// AskReply is an approver's answer to a HostnameAsk.
type AskReply int

const (
	// AskReject refuses the query (REFUSED).
	AskReject AskReply = iota
	// AskOnce answers the queries for the name that are waiting now.
	AskOnce
	// AskAlways answers them and every later query for the name in this
	// session; the approver persists it for later sessions.
	AskAlways
)

// AskFunc asks an approver about q and waits for the answer. It must
// return once ctx is done (the policy's ask_timeout_seconds); reason names
// a refusal for the audit record (rejected, timeout, busy, ...).
type AskFunc func(ctx context.Context, q HostnameAsk) (reply AskReply, reason string)

// Refusal reasons of the ask path (DNSRefusal.Reason).
const (
	ReasonNoApprover  = "no-approver"
	ReasonAskTimeout  = "ask-timeout"
	ReasonAskRejected = "ask-rejected"
	ReasonAskBusy     = "ask-busy"
	ReasonAskClosed   = "session-closed"
)

// maxAsking bounds the distinct names one session may have waiting for an
// approval: each holds its queries' goroutines in the root supervisor.
const maxAsking = 16

// askState is a session's held and approved unknown names.
type askState struct {
	mu sync.Mutex
	// approved are names answered AskAlways in this session.
	approved map[string]bool
	// waiting coalesces the queries for one name (a client's retries,
	// its A and AAAA) into one approval.
	waiting map[string]*askWait
	// ctx ends every approval when the session resolver closes: the DNS
	// server's shutdown waits for the queries it holds.
	ctx    context.Context
	cancel context.CancelFunc
}

// context returns the session's approval context; a.mu is held.
func (a *askState) context() context.Context {
	if a.ctx == nil {
		a.ctx, a.cancel = context.WithCancel(context.Background())
	}
	return a.ctx
}

// close refuses every held query and every later one.
func (a *askState) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.context()
	a.cancel()
}

type askWait struct {
	done   chan struct{}
	reply  AskReply
	reason string
}

// SetAsk replaces the approver of names no rule allows (nil: nobody, such
// names are refused with reason no-approver). Sessions already running
// use the new one from their next query.
func (r *Resolver) SetAsk(fn AskFunc) {
	if fn == nil {
		r.ask.Store(nil)
		return
	}
	r.ask.Store(&fn)
}

func (r *Resolver) asker() AskFunc {
	if p := r.ask.Load(); p != nil {
		return *p
	}
	return nil
}

// askTimeout is the session's bound on holding a query for an answer.
func askTimeout(n policy.Network) time.Duration {
	if n.AskTimeoutSeconds == 0 {
		return policy.DefaultAskTimeoutSeconds * time.Second
	}
	return time.Duration(n.AskTimeoutSeconds) * time.Second
}

// approve decides a query for name, which no allow entry matches. It
// returns "" when the name may be answered, else the refusal reason. In
// ask mode, an A or AAAA query waits for the approver (bounded by the
// policy's timeout); every other case is refused at once.
func (s *SessionResolver) approve(name string, qtype uint16, client netip.AddrPort) string {
	a := &s.asks
	a.mu.Lock()
	if a.approved[name] {
		a.mu.Unlock()
		return ""
	}
	if s.net.UnknownHosts != policy.UnknownHostsAsk || (qtype != dns.TypeA && qtype != dns.TypeAAAA) {
		a.mu.Unlock()
		return "not-allowed"
	}
	ask := s.r.asker()
	if ask == nil {
		a.mu.Unlock()
		return ReasonNoApprover
	}
	parent := a.context()
	if parent.Err() != nil {
		a.mu.Unlock()
		return ReasonAskClosed
	}
	w, joined := a.waiting[name]
	if !joined {
		if len(a.waiting) >= maxAsking {
			a.mu.Unlock()
			return ReasonAskBusy
		}
		if a.waiting == nil {
			a.waiting = map[string]*askWait{}
		}
		w = &askWait{done: make(chan struct{})}
		a.waiting[name] = w
	}
	a.mu.Unlock()
	if !joined {
		go s.askApprover(parent, ask, w, HostnameAsk{CgroupID: s.cgroupID, Name: name, Type: dns.TypeToString[qtype], Client: client})
	}
	<-w.done
	switch w.reply {
	case AskOnce, AskAlways:
		return ""
	}
	return w.reason
}

// askApprover runs one approval for every query waiting on w. The wait is
// bounded here too, so that an approver ignoring its context cannot hold
// the session's queries forever.
func (s *SessionResolver) askApprover(parent context.Context, ask AskFunc, w *askWait, q HostnameAsk) {
	timeout := askTimeout(s.net)
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	type answer struct {
		reply  AskReply
		reason string
	}
	got := make(chan answer, 1)
	go func() {
		reply, reason := ask(ctx, q)
		got <- answer{reply, reason}
	}()
	var ans answer
	select {
	case ans = <-got:
	case <-ctx.Done():
		// Whatever the approver does now comes too late.
		ans = answer{AskReject, ReasonAskTimeout}
	}
	if parent.Err() != nil {
		ans = answer{AskReject, ReasonAskClosed}
	} else if ctx.Err() != nil && ans.reply != AskReject {
		// An approval that raced the deadline: the queries it was for
		// have been given up.
		ans = answer{AskReject, ReasonAskTimeout}
	}
	if ans.reply == AskReject && ans.reason == "" {
		ans.reason = ReasonAskRejected
	}
	a := &s.asks
	a.mu.Lock()
	if ans.reply == AskAlways {
		if a.approved == nil {
			a.approved = map[string]bool{}
		}
		a.approved[q.Name] = true
	}
	delete(a.waiting, q.Name)
	a.mu.Unlock()
	w.reply, w.reason = ans.reply, ans.reason
	close(w.done)
}
