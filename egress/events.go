package egress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Op is the hook that refused.
type Op uint8

// Values of struct net_event.op (bpf/net.h).
const (
	OpConnect    Op = 1
	OpSendmsg    Op = 2
	OpSockCreate Op = 3
	OpSkbEgress  Op = 4
)

func (o Op) String() string {
	switch o {
	case OpConnect:
		return "connect"
	case OpSendmsg:
		return "sendmsg"
	case OpSockCreate:
		return "socket"
	case OpSkbEgress:
		return "egress"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Reason says which rule refused.
type Reason uint8

// Values of struct net_event.reason (bpf/net.h).
const (
	ReasonPolicyNone Reason = 1
	ReasonNotAllowed Reason = 2
	ReasonPort       Reason = 3
	ReasonExpired    Reason = 4
	ReasonGuarded    Reason = 5
	ReasonLoopback   Reason = 6
	ReasonRawSocket  Reason = 7
	ReasonDNS        Reason = 8
	ReasonProtocol   Reason = 9
	// ReasonResolver: the destination is another session's resolver.
	ReasonResolver Reason = 10
)

func (r Reason) String() string {
	switch r {
	case ReasonPolicyNone:
		return "network-none"
	case ReasonNotAllowed:
		return "not-in-allowlist"
	case ReasonPort:
		return "port-not-allowed"
	case ReasonExpired:
		return "resolver-entry-expired"
	case ReasonGuarded:
		return "metadata-or-link-local"
	case ReasonLoopback:
		return "loopback"
	case ReasonRawSocket:
		return "raw-socket"
	case ReasonDNS:
		return "dns-without-resolver"
	case ReasonProtocol:
		return "protocol"
	case ReasonResolver:
		return "other-session-resolver"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Event is one kernel refusal, decoded from struct net_event.
type Event struct {
	// BootTimeNs is CLOCK_BOOTTIME when the kernel refused.
	BootTimeNs uint64
	CgroupID   uint64
	// Suppressed is the session's flood-control count when the kernel
	// sent the event (it only grows).
	Suppressed uint64
	// PID, TID, UID and Comm are zero for OpSkbEgress, which may run
	// outside the sending task's context.
	PID, TID, UID uint32
	Comm          string
	Op            Op
	Reason        Reason
	// Family is the socket's address family (AF_INET/AF_INET6), 0 when
	// unknown (egress floor).
	Family   uint8
	Protocol uint8 // IPPROTO_*
	SockType uint16
	// Destination is unmapped: an IPv4-mapped destination reads as IPv4.
	// Invalid for OpSockCreate.
	Destination netip.AddrPort
}

// eventSize is sizeof(struct net_event): the shared header (struct
// oxs_event_header, bpf/events.h) and the network fields after it.
const eventSize = 88

// DecodeEvent decodes one record of bpf/net.c (source loader.SourceNet of
// the shared ring buffer).
func DecodeEvent(raw []byte) (Event, error) {
	if len(raw) < eventSize {
		return Event{}, fmt.Errorf("decode net event: %d bytes, want %d", len(raw), eventSize)
	}
	le := binary.LittleEndian
	var e Event
	e.CgroupID = le.Uint64(raw[8:])
	e.Suppressed = le.Uint64(raw[16:])
	e.BootTimeNs = le.Uint64(raw[24:])
	e.PID = le.Uint32(raw[32:])
	e.TID = le.Uint32(raw[36:])
	e.UID = le.Uint32(raw[40:])
	e.Op = Op(raw[44])
	e.Reason = Reason(raw[45])
	e.Family = raw[46]
	e.Protocol = raw[47]
	port := le.Uint16(raw[64:])
	e.SockType = le.Uint16(raw[66:])
	if e.Op != OpSockCreate {
		addr := netip.AddrFrom16([16]byte(raw[48:64])).Unmap()
		e.Destination = netip.AddrPortFrom(addr, port)
	}
	comm := raw[72:88]
	if i := bytes.IndexByte(comm, 0); i >= 0 {
		comm = comm[:i]
	}
	e.Comm = string(comm)
	return e, nil
}

// DNSAnswer is a query the resolver answered for a name the session may
// resolve. Answers write no audit record; ResolverConfig.OnAnswer hands
// them to whoever counts them (the daemon's metrics).
type DNSAnswer struct {
	CgroupID uint64
	Result   AnswerResult
}

// AnswerResult is what an answered query got. The set is closed (fit for
// a metric label): no name or address is part of it.
type AnswerResult string

const (
	// AnswerAddresses: NOERROR with addresses, admitted for the session.
	AnswerAddresses AnswerResult = "addresses"
	// AnswerNoData: NOERROR without addresses (a record type other than
	// A and AAAA, or a name with no address of the type asked).
	AnswerNoData AnswerResult = "nodata"
	// AnswerNXDomain: upstream says the name does not exist.
	AnswerNXDomain AnswerResult = "nxdomain"
)

// DNSRefusal is a query the resolver refused.
type DNSRefusal struct {
	CgroupID uint64
	Name     string // normalized: lower case, no trailing dot
	Type     string // "A", "AAAA", ...
	// Reason is "not-allowed", "rebinding" (an allowed name answered with
	// a guarded address), "upstream" (no usable answer; fail closed) or
	// "busy" (too many lookups of the session outstanding; SERVFAIL).
	Reason string
	// Address is the refused answer for Reason "rebinding".
	Address netip.Addr
	Client  netip.AddrPort
}
