//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/bpfring"
	"github.com/openoxide/oxsupervise/egress"
	"github.com/openoxide/oxsupervise/loader"
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
	// OnAnswer, when set, receives the resolvers' answers
	// (egress.ResolverConfig.OnAnswer): the daemon counts them in its
	// metrics. Refusals are audit records of this layer instead.
	OnAnswer func(egress.DNSAnswer)
	// Events is the ring buffer shared with the other BPF layers; nil
	// opens one for this layer alone.
	Events *bpfring.Ring
	// Warn receives warnings (audit records that could not be written).
	Warn io.Writer
	// Flood tunes the per-session flood control, in the kernel and in
	// front of the audit sink.
	Flood audit.FloodOptions
	// Pinned, when set, is where the programs are pinned already,
	// attached on Parent and reporting through Events (package host):
	// they are opened from there instead of loaded again.
	Pinned string
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
	enf *egress.Enforcer
	ev  kernelEvents
}

// NewNetworkLayer attaches the network programs on cfg.Parent. An error
// means cgroup BPF network enforcement is not available here.
func NewNetworkLayer(cfg NetworkConfig) (*NetworkLayer, error) {
	l := &NetworkLayer{ev: kernelEvents{src: loader.SourceNet, layer: audit.LayerCgroupNet, what: "network", flood: cfg.Flood}}
	if err := newKernelEvents(&l.ev, cfg.Events, cfg.Warn); err != nil {
		return nil, err
	}
	resolver := egress.ResolverConfig{Upstream: cfg.Upstream, Timeout: cfg.Timeout, OnRefusal: l.dnsRefused, OnAnswer: cfg.OnAnswer}
	enf, err := egress.Attach(cfg.Parent, egress.Config{
		Resolver: resolver,
		Events:   l.ev.ring.Maps(),
		Pinned:   cfg.Pinned,
	})
	if err != nil {
		l.ev.closeAll(func() error { return nil })
		return nil, err
	}
	l.enf = enf
	l.ev.record = func(es *eventSession, _ bpfring.Header, raw []byte) (*audit.Record, error) {
		ev, err := egress.DecodeEvent(raw)
		if err != nil {
			return nil, err
		}
		return networkRecord(ev, es, enf.Hostname, time.Now()), nil
	}
	l.ev.forget = enf.RemoveSession
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
	es, err := l.ev.open(s)
	if err != nil {
		return nil, err
	}
	if err := l.enf.AddSession(s.CgroupID, s.Policy.Network); err != nil {
		l.ev.abort(s.CgroupID)
		return nil, err
	}
	es.rules = true
	return func(context.Context) error { return l.Remove(s.CgroupID) }, nil
}

// Remove ends one session: its remaining refusals are written, then its
// rules are dropped. Call it once the session's group is empty. Apply's
// teardown does this for run; a long-lived owner (the daemon) calls it
// when an attached session ends.
func (l *NetworkLayer) Remove(cgroupID uint64) error { return l.ev.end(cgroupID) }

// Close removes every session still applied, detaches the programs and
// stops the resolvers. Tasks still in those sessions lose their network
// confinement, so callers kill the sessions first.
func (l *NetworkLayer) Close() error {
	return l.ev.closeAll(l.enf.Close)
}

// networkRecord builds the audit record of ev. hostname names the allowed
// host an address was resolved for, when there is one.
func networkRecord(ev egress.Event, ns *eventSession, hostname func(uint64, netip.Addr) (string, bool), now time.Time) *audit.Record {
	r := &audit.Record{
		Timestamp: bootToWall(ev.BootTimeNs, now),
		Event:     audit.Event{Action: ev.Op.String(), Reason: ev.Reason.String()},
		Ox: audit.Ox{Kind: audit.KindDenial, Session: ns.id, Layer: audit.LayerCgroupNet, Class: audit.ClassNetwork,
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
	ns := l.ev.session(d.CgroupID)
	if ns == nil || ns.w == nil {
		return
	}
	writeRecord(ns.w, dnsRecord(d, ns), l.ev.warn)
}

func dnsRecord(d egress.DNSRefusal, ns *eventSession) *audit.Record {
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
