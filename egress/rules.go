package egress

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/openoxide/oxsupervise/policy"
)

// allPorts is what a rule without ports admits.
var allPorts = []policy.PortRange{{First: 0, Last: 65535}}

// specialRanges are where an allowed hostname must not point unless the
// policy lists an address prefix that covers the answer at least as
// specifically (the DNS-rebinding guard). Metadata and link-local are
// refused by the kernel side too; the rest would otherwise be reachable
// through a public name pointed at them.
var specialRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("ff00::/8"),
}

// nat64 is the well-known NAT64 prefix (RFC 6052).
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// rebindingAllowed reports whether answer addr may be admitted for a
// session: ordinary public addresses always, special ones only when a
// prefix rule names their range explicitly.
func rebindingAllowed(addr netip.Addr, rules []policy.NetRule) (bool, netip.Prefix) {
	addr = addr.Unmap()
	if nat64.Contains(addr) {
		// A DNS64 answer reaches the IPv4 address it embeds through the
		// translator: judge that address, so 64:ff9b::a9fe:a9fe is the
		// metadata service and 64:ff9b::7f00:1 loopback.
		b := addr.As16()
		if ok, special := rebindingAllowed(netip.AddrFrom4([4]byte(b[12:])), rules); !ok {
			return false, special
		}
	}
	for _, special := range specialRanges {
		if !special.Contains(addr) {
			continue
		}
		for _, r := range rules {
			p := unmapPrefix(r.Prefix)
			if p.IsValid() && p.Contains(addr) && p.Bits() >= special.Bits() {
				return true, special
			}
		}
		return false, special
	}
	return true, netip.Prefix{}
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if !p.IsValid() || !p.Addr().Is4In6() {
		return p
	}
	bits := p.Bits() - 96
	if bits < 0 {
		// ::ffff:0:0/95 and shorter reach beyond IPv4; keep them IPv6.
		return p
	}
	return netip.PrefixFrom(p.Addr().Unmap(), bits).Masked()
}

// trieKeyPrefix returns the 16-byte address and the address-bit length of
// p in the trie's IPv6 space, where IPv4 lives IPv4-mapped.
func trieKeyPrefix(p netip.Prefix) ([16]byte, int) {
	p = unmapPrefix(p).Masked()
	if p.Addr().Is4() {
		return p.Addr().As16(), 96 + p.Bits()
	}
	return p.Addr().As16(), p.Bits()
}

// normalizeName lower-cases a DNS name and drops its trailing dot so that
// "Example.TEST." and "example.test" match the same rules.
func normalizeName(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// hostMatches reports whether name matches a policy host pattern:
// "example.com" exactly, "*.example.com" exactly one label below it,
// "**.example.com" any depth below it (neither wildcard admits the apex).
func hostMatches(pattern, name string) bool {
	pattern = normalizeName(pattern)
	name = normalizeName(name)
	switch {
	case strings.HasPrefix(pattern, "**."):
		suffix := pattern[2:] // ".example.com"
		return len(name) > len(suffix) && strings.HasSuffix(name, suffix)
	case strings.HasPrefix(pattern, "*."):
		suffix := pattern[1:]
		if len(name) <= len(suffix) || !strings.HasSuffix(name, suffix) {
			return false
		}
		label := name[:len(name)-len(suffix)]
		return label != "" && !strings.Contains(label, ".")
	default:
		return pattern != "" && name == pattern
	}
}

// matchHost returns the port ranges every host rule matching name admits,
// and whether any rule matched.
func matchHost(rules []policy.NetRule, name string) ([]policy.PortRange, bool) {
	if strings.ContainsRune(name, '\\') {
		// A presentation-format escape: `evil\.example.com` is one label
		// "evil.example" under com, yet ends in ".example.com" as text.
		// No hostname needs escapes, so none matches.
		return nil, false
	}
	var ports []policy.PortRange
	matched := false
	for _, r := range rules {
		if r.Host == "" || !hostMatches(r.Host, name) {
			continue
		}
		matched = true
		if len(r.Ports) == 0 {
			return allPorts, true
		}
		ports = append(ports, r.Ports...)
	}
	return ports, matched
}

// validateNetwork rejects a policy the kernel side cannot represent, before
// anything is written, so a session is never half configured.
func validateNetwork(n policy.Network) error {
	switch n.Policy {
	case policy.NetNone, policy.NetAllowlist, policy.NetFull:
	default:
		return fmt.Errorf("network policy %q: want none, allowlist or full", n.Policy)
	}
	switch n.Loopback {
	case policy.LoopbackNone, policy.LoopbackSession, policy.LoopbackAll, "":
	default:
		return fmt.Errorf("loopback %q: want none, session or all", n.Loopback)
	}
	for i, r := range n.Allow {
		if r.Prefix.IsValid() == (r.Host != "") {
			return fmt.Errorf("network allow entry %d (%s): needs exactly one of prefix and host", i, r.Source)
		}
		if len(r.Ports) > maxRanges {
			return fmt.Errorf("network allow entry %d (%s): %d port ranges, at most %d", i, r.Source, len(r.Ports), maxRanges)
		}
		for _, pr := range r.Ports {
			if pr.First > pr.Last {
				return fmt.Errorf("network allow entry %d (%s): port range %d-%d is reversed", i, r.Source, pr.First, pr.Last)
			}
		}
		if r.Host != "" {
			h := strings.TrimPrefix(strings.TrimPrefix(r.Host, "**."), "*.")
			if h == "" || strings.ContainsAny(h, "*/ :") {
				return fmt.Errorf("network allow entry %d (%s): host pattern %q is not a name", i, r.Source, r.Host)
			}
		}
	}
	return nil
}

// maxRanges matches NET_MAX_RANGES in bpf/net.h.
const maxRanges = 16

// portRange is one trie value range with its expiry (CLOCK_BOOTTIME ns, 0
// for never).
type portRange struct {
	First, Last uint16
	Expires     uint64
}

// mergeRanges adds add to have: an identical range keeps the later expiry
// (never beats any time), a new one is appended. Ranges that expired
// before now are dropped first, so a long-lived session does not fill the
// value with dead answers.
func mergeRanges(have []portRange, add []portRange, now uint64) ([]portRange, error) {
	out := have[:0:0]
	for _, r := range have {
		if r.Expires != 0 && r.Expires <= now {
			continue
		}
		out = append(out, r)
	}
next:
	for _, a := range add {
		for i := range out {
			if out[i].First != a.First || out[i].Last != a.Last {
				continue
			}
			if out[i].Expires != 0 && (a.Expires == 0 || a.Expires > out[i].Expires) {
				out[i].Expires = a.Expires
			}
			continue next
		}
		out = append(out, a)
	}
	if len(out) > maxRanges {
		return nil, fmt.Errorf("%d port ranges for one address, at most %d", len(out), maxRanges)
	}
	return out, nil
}

func toRanges(ports []policy.PortRange, expires uint64) []portRange {
	if len(ports) == 0 {
		ports = allPorts
	}
	out := make([]portRange, 0, len(ports))
	for _, p := range ports {
		out = append(out, portRange{First: p.First, Last: p.Last, Expires: expires})
	}
	return out
}
