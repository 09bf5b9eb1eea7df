//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/egress"
)

// NetworkConfig configures NewNetworkLayer.
type NetworkConfig struct {
	// Parent is the cgroup v2 directory whose child groups are the
	// sessions; the programs attach there.
	Parent string
	// Upstream and Timeout configure the per-session DNS resolvers
	// (egress.ResolverConfig); empty Upstream means /etc/resolv.conf.
	Upstream []string
	Timeout  time.Duration
	// Warn receives warnings (audit records that could not be written).
	Warn io.Writer
	// Flood tunes the per-session flood control in front of the audit
	// sink: the network programs have no kernel-side token bucket.
	Flood audit.FloodOptions
}

// NetworkLayer is the SessionLayer LayerNetwork: cgroup BPF network rules
// (package egress) for sessions below one parent cgroup, and the audit
// records of every refusal — kernel refusals (layer cgroup), resolver
// refusals (layer resolver) and lost kernel events (events_lost).
//
// The programs, the resolvers and the event reader live in this process:
// when it closes, confinement ends. Run closes it after its session is
// gone; attach keeps the supervisor in the foreground for as long as the
// attached session lives (see Close).
type NetworkLayer struct {
	enf    *egress.Enforcer
	events *egress.EventReader
	warn   io.Writer
	flood  audit.FloodOptions

	mu       sync.Mutex
	sessions map[uint64]*netSession
	// lost is the kernel's lost-event count already reported.
	lost uint64
	// drainReq asks the event loop to read everything queued and report
	// losses, then close the channel it was sent.
	drainReq chan chan struct{}
	stop     chan struct{}
	loopDone chan struct{}
	closed   bool
}

// netSession is what the layer knows of one session.
type netSession struct {
	sessionAudit
}

// eventPoll bounds how long the event loop blocks before it checks the
// lost counter and drain requests.
const eventPoll = 50 * time.Millisecond

// NewNetworkLayer attaches the network programs on cfg.Parent. An error
// means cgroup BPF network enforcement is not available here.
func NewNetworkLayer(cfg NetworkConfig) (*NetworkLayer, error) {
	l := &NetworkLayer{
		warn: warnOrDiscard(cfg.Warn), flood: cfg.Flood,
		sessions: map[uint64]*netSession{},
		drainReq: make(chan chan struct{}), stop: make(chan struct{}), loopDone: make(chan struct{}),
	}
	enf, err := egress.Attach(cfg.Parent, egress.Config{Resolver: egress.ResolverConfig{
		Upstream: cfg.Upstream, Timeout: cfg.Timeout, OnRefusal: l.dnsRefused,
	}})
	if err != nil {
		return nil, err
	}
	l.enf = enf
	events, err := enf.Events()
	if err != nil {
		enf.Close()
		return nil, err
	}
	l.events = events
	// Losses from before this supervisor (the maps are its own, so only
	// a reload could have any) are not this supervisor's to report.
	if n, err := events.Lost(); err == nil {
		l.lost = n
	}
	go l.loop()
	return l, nil
}

// Name implements SessionLayer.
func (l *NetworkLayer) Name() string { return LayerNetwork }

// Apply confines s's cgroup to s.Policy.Network and opens the session's
// audit sink (s.Policy.Audit.Path, default audit.DefaultPath). An audit
// log that cannot be opened is a warning, as for the rest of the session:
// audit is observability, not the boundary.
func (l *NetworkLayer) Apply(ctx context.Context, s SessionInfo) (func(context.Context) error, error) {
	if s.Policy == nil {
		return nil, errors.New("no policy")
	}
	ns := &netSession{openSessionAudit(s, l.flood, l.warn, "network")}
	// Registered first: the first refusal may come before AddSession
	// returns.
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		ns.close(l.warn)
		return nil, errors.New("network layer already closed")
	}
	l.sessions[s.CgroupID] = ns
	l.mu.Unlock()
	if err := l.enf.AddSession(s.CgroupID, s.Policy.Network); err != nil {
		l.mu.Lock()
		delete(l.sessions, s.CgroupID)
		l.mu.Unlock()
		ns.close(l.warn)
		return nil, err
	}
	return func(context.Context) error { return l.Remove(s.CgroupID) }, nil
}

// Remove ends one session: its remaining refusals are written, then its
// rules are dropped. Call it once the session's group is empty. Apply's
// teardown does this for run; a long-lived owner (the daemon) calls it
// when an attached session ends.
func (l *NetworkLayer) Remove(cgroupID uint64) error {
	l.drain()
	err := l.enf.RemoveSession(cgroupID)
	l.mu.Lock()
	ns := l.sessions[cgroupID]
	delete(l.sessions, cgroupID)
	l.mu.Unlock()
	if ns != nil {
		ns.close(l.warn)
	}
	return err
}

// Close removes every session still applied, detaches the programs and
// stops the resolvers. Tasks still in those sessions lose their network
// confinement, so callers kill the sessions first.
func (l *NetworkLayer) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	ids := make([]uint64, 0, len(l.sessions))
	for id := range l.sessions {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, l.Remove(id))
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.loopDone
	errs = append(errs, l.events.Close(), l.enf.Close())
	return errors.Join(errs...)
}

// drain waits until every event queued now has been written.
func (l *NetworkLayer) drain() {
	done := make(chan struct{})
	select {
	case l.drainReq <- done:
		<-done
	case <-l.loopDone:
	}
}

// loop turns kernel events into audit records until Close.
func (l *NetworkLayer) loop() {
	defer close(l.loopDone)
	flushTick := time.NewTicker(time.Second)
	defer flushTick.Stop()
	for {
		select {
		case <-l.stop:
			l.readQueued()
			l.checkLost()
			return
		case done := <-l.drainReq:
			l.readQueued()
			l.checkLost()
			close(done)
			continue
		case <-flushTick.C:
			l.checkLost()
			l.flushAll()
		default:
		}
		l.events.SetDeadline(time.Now().Add(eventPoll))
		ev, err := l.events.Read()
		switch {
		case err == nil:
			l.eventRefused(ev)
		case errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, ringbuf.ErrClosed):
			return
		default:
			fmt.Fprintf(l.warn, "oxsupervise: warning: network events: %v\n", err)
			time.Sleep(eventPoll)
		}
	}
}

// readQueued writes every event already in the ring buffer. The kernel
// queues an event before the refused syscall returns, so after a
// session's last task is gone this sees all of its events.
func (l *NetworkLayer) readQueued() {
	for {
		l.events.SetDeadline(time.Now())
		ev, err := l.events.Read()
		if err != nil {
			return
		}
		l.eventRefused(ev)
	}
}

func (l *NetworkLayer) checkLost() {
	n, err := l.events.Lost()
	if err != nil {
		fmt.Fprintf(l.warn, "oxsupervise: warning: %v\n", err)
		return
	}
	l.mu.Lock()
	delta := n - l.lost
	l.lost = n
	sinks := l.sinksLocked()
	l.mu.Unlock()
	if delta == 0 {
		return
	}
	// The kernel cannot say whose events it lost: every session's log
	// hears about it, and the warning goes to the terminal too.
	fmt.Fprintf(l.warn, "oxsupervise: warning: %d network refusal events lost (ring buffer full)\n", delta)
	for _, w := range sinks {
		writeRecord(w, &audit.Record{
			Message: fmt.Sprintf("%d network refusal events lost: the kernel ring buffer was full", delta),
			Ox:      audit.Ox{Kind: audit.KindEventsLost, Layer: audit.LayerCgroup, EventsLost: delta},
		}, l.warn)
	}
}

// sinksLocked returns one writer per open session sink; l.mu is held.
func (l *NetworkLayer) sinksLocked() []audit.Writer {
	var out []audit.Writer
	for _, ns := range l.sessions {
		if ns.sink != nil {
			out = append(out, ns.sink)
		}
	}
	return out
}

func (l *NetworkLayer) flushAll() {
	l.mu.Lock()
	var ws []*audit.FloodControl
	for _, ns := range l.sessions {
		if ns.w != nil {
			ws = append(ws, ns.w)
		}
	}
	l.mu.Unlock()
	flushSuppressed(ws, l.warn)
}

func (l *NetworkLayer) session(cgroupID uint64) *netSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sessions[cgroupID]
}

// eventRefused writes the record of one kernel refusal.
func (l *NetworkLayer) eventRefused(ev egress.Event) {
	ns := l.session(ev.CgroupID)
	if ns == nil {
		// The programs only report sessions this layer added; one that
		// was removed meanwhile has nowhere to go but the terminal.
		fmt.Fprintf(l.warn, "oxsupervise: warning: network refusal of an unknown session (cgroup %d): %s %s\n", ev.CgroupID, ev.Op, ev.Destination)
		return
	}
	if ns.w == nil {
		return
	}
	writeRecord(ns.w, networkRecord(ev, ns, l.enf.Hostname, time.Now()), l.warn)
}

// networkRecord builds the audit record of ev. hostname names the allowed
// host an address was resolved for, when there is one.
func networkRecord(ev egress.Event, ns *netSession, hostname func(uint64, netip.Addr) (string, bool), now time.Time) *audit.Record {
	r := &audit.Record{
		Timestamp: bootToWall(ev.BootTimeNs, now),
		Event:     audit.Event{Action: ev.Op.String(), Reason: ev.Reason.String()},
		Ox: audit.Ox{Kind: audit.KindDenial, Session: ns.id, Layer: audit.LayerCgroup, Class: audit.ClassNetwork,
			Errno: int(unix.EPERM), Rule: ev.Reason.String(), Mode: ns.mode},
	}
	if ev.PID != 0 {
		r.Process = &audit.Process{PID: int(ev.PID), Name: ev.Comm, Thread: &audit.Thread{ID: int(ev.TID)}}
		r.User = &audit.User{ID: fmt.Sprint(ev.UID)}
	}
	netw := &audit.Network{Transport: transportName(ev.Protocol, ev.SockType)}
	switch ev.Family {
	case unix.AF_INET:
		netw.Type = "ipv4"
	case unix.AF_INET6:
		netw.Type = "ipv6"
	}
	if ev.Destination.IsValid() {
		d := &audit.Destination{IP: ev.Destination.Addr(), Port: ev.Destination.Port()}
		if name, ok := hostname(ev.CgroupID, d.IP); ok {
			d.Domain = name
		}
		r.Destination = d
		// Judged as IPv4 when mapped: say what was judged.
		if d.IP.Is4() {
			netw.Type = "ipv4"
		} else if netw.Type == "" {
			netw.Type = "ipv6"
		}
		r.Message = fmt.Sprintf("%s to %s refused: %s", ev.Op, ev.Destination, ev.Reason)
	} else {
		r.Message = fmt.Sprintf("%s refused: %s", ev.Op, ev.Reason)
	}
	if netw.Transport != "" || netw.Type != "" {
		r.Network = netw
	}
	return r
}

func transportName(proto uint8, sockType uint16) string {
	switch proto {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_ICMP:
		return "icmp"
	case unix.IPPROTO_ICMPV6:
		return "ipv6-icmp"
	}
	switch sockType {
	case unix.SOCK_STREAM:
		return "tcp"
	case unix.SOCK_DGRAM:
		return "udp"
	}
	return ""
}

// bootToWall converts a CLOCK_BOOTTIME stamp of the kernel into wall time.
func bootToWall(bootNs uint64, now time.Time) time.Time {
	var ts unix.Timespec
	if bootNs == 0 || unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return now
	}
	ago := time.Duration(int64(ts.Nano()) - int64(bootNs))
	if ago < 0 {
		return now
	}
	return now.Add(-ago)
}

// dnsRefused is the resolver's OnRefusal: it writes a resolver record.
// It runs in the resolver's goroutine and must not block on the layer
// for long.
func (l *NetworkLayer) dnsRefused(d egress.DNSRefusal) {
	ns := l.session(d.CgroupID)
	if ns == nil || ns.w == nil {
		return
	}
	writeRecord(ns.w, dnsRecord(d, ns), l.warn)
}

func dnsRecord(d egress.DNSRefusal, ns *netSession) *audit.Record {
	rcode := "REFUSED"
	rule := "not in network.allow"
	switch d.Reason {
	case "upstream":
		rcode = "SERVFAIL"
		rule = "no usable upstream answer (fail closed)"
	case "rebinding":
		rule = "allowed name answered with a guarded address (DNS rebinding)"
	case "busy":
		rcode = "SERVFAIL"
		rule = "too many outstanding lookups for this session (resolver bound)"
	case egress.ReasonAskRejected:
		rule = "network.unknown_hosts = ask: the approver rejected the name"
	case egress.ReasonAskTimeout:
		rule = "network.unknown_hosts = ask: no answer within network.ask_timeout_seconds"
	case egress.ReasonNoApprover:
		rule = "network.unknown_hosts = ask: no daemon to ask (standalone run)"
	case egress.ReasonAskBusy:
		rule = "network.unknown_hosts = ask: too many names pending approval for this session"
	case egress.ReasonAskClosed:
		rule = "network.unknown_hosts = ask: the session ended while the name was pending"
	}
	r := &audit.Record{
		Message: fmt.Sprintf("dns query %s %s refused: %s", d.Type, d.Name, d.Reason),
		Event:   audit.Event{Action: "dns", Reason: d.Reason},
		DNS:     &audit.DNS{Question: audit.DNSQuestion{Name: d.Name, Type: d.Type}, ResponseCode: rcode},
		Ox: audit.Ox{Kind: audit.KindDenial, Session: ns.id, Layer: audit.LayerResolver, Class: audit.ClassDNS,
			Rule: rule, Mode: ns.mode},
	}
	if d.Address.IsValid() {
		r.Destination = &audit.Destination{IP: d.Address.Unmap(), Domain: d.Name}
	}
	return r
}
