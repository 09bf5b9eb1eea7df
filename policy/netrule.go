package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// ParseNetRule parses one network allow entry:
//
//	github.com  *.npmjs.org  **.example.com:443   hostnames (IDNA, any case, trailing dot ok)
//	10.0.0.0/8:443  192.0.2.7  192.0.2.7:80,443   IPv4 address or prefix, optional ports
//	2001:db8::/32  [2001:db8::1]:22  [fd00::/8]:8000-8999   IPv6 (brackets when a port follows)
//
// "*." matches exactly one more label, "**." any number (at least one).
// Ports are a comma-separated list of ports or inclusive ranges.
func ParseNetRule(s string) (NetRule, error) {
	orig := s
	s = strings.TrimSpace(s)
	if s == "" {
		return NetRule{}, fmt.Errorf("empty network entry")
	}
	var r NetRule
	host, ports := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return NetRule{}, fmt.Errorf("%q: missing ']'", orig)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return NetRule{}, fmt.Errorf("%q: expected :PORT after ']'", orig)
			}
			ports = rest[1:]
		}
	case strings.Count(s, ":") == 1:
		i := strings.IndexByte(s, ':')
		host, ports = s[:i], s[i+1:]
	}
	if ports != "" || strings.HasSuffix(s, ":") {
		pr, err := parsePorts(ports)
		if err != nil {
			return NetRule{}, fmt.Errorf("%q: %w", orig, err)
		}
		r.Ports = pr
	}
	if p, err := parsePrefix(host); err == nil {
		r.Prefix = p
		return r, nil
	} else if looksNumeric(host) {
		return NetRule{}, fmt.Errorf("%q: %w", orig, err)
	}
	h, err := normalizeHost(host)
	if err != nil {
		return NetRule{}, fmt.Errorf("%q: %w", orig, err)
	}
	r.Host = h
	return r, nil
}

// looksNumeric is true for strings that can only be meant as an address.
func looksNumeric(s string) bool {
	if strings.ContainsAny(s, ":/") {
		return true
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '.') {
			return false
		}
	}
	return true
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("bad address prefix: %w", err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		if p.Addr().Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("zoned addresses are not supported")
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad address: %w", err)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zoned addresses are not supported")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parsePorts(s string) ([]PortRange, error) {
	if s == "" {
		return nil, fmt.Errorf("empty port")
	}
	var out []PortRange
	for _, part := range strings.Split(s, ",") {
		first, last, isRange := strings.Cut(part, "-")
		f, err := parsePort(first)
		if err != nil {
			return nil, err
		}
		l := f
		if isRange {
			if l, err = parsePort(last); err != nil {
				return nil, err
			}
			if l < f {
				return nil, fmt.Errorf("port range %s is reversed", part)
			}
		}
		out = append(out, PortRange{First: f, Last: l})
	}
	return out, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("bad port %q (want 1-65535)", s)
	}
	return uint16(n), nil
}

// normalizeHost lower-cases, IDNA-encodes and validates a hostname pattern.
func normalizeHost(s string) (string, error) {
	s = strings.TrimSuffix(s, ".")
	wild := ""
	switch {
	case strings.HasPrefix(s, "**."):
		wild, s = "**.", s[3:]
	case strings.HasPrefix(s, "*."):
		wild, s = "*.", s[2:]
	}
	if s == "" {
		return "", fmt.Errorf("empty hostname")
	}
	if strings.Contains(s, "*") {
		return "", fmt.Errorf("wildcards are only allowed as a whole first label (*.example.com or **.example.com)")
	}
	a, err := idna.Lookup.ToASCII(s)
	if err != nil {
		return "", fmt.Errorf("bad hostname: %w", err)
	}
	a = strings.ToLower(a)
	labels := strings.Split(a, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", fmt.Errorf("bad hostname: empty or over-long label")
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("bad hostname: character %q", c)
			}
		}
	}
	if wild != "" && len(labels) < 2 {
		return "", fmt.Errorf("a wildcard must cover at least a two-label domain, not %q", a)
	}
	if len(a) > 253 {
		return "", fmt.Errorf("hostname longer than 253 bytes")
	}
	return wild + a, nil
}

// MatchHost reports whether hostname (already normalised) is admitted by
// the pattern of a NetRule.Host.
func MatchHost(pattern, hostname string) bool {
	hostname = strings.ToLower(strings.TrimSuffix(hostname, "."))
	switch {
	case strings.HasPrefix(pattern, "**."):
		suffix := pattern[2:]
		return strings.HasSuffix(hostname, suffix) && len(hostname) > len(suffix)
	case strings.HasPrefix(pattern, "*."):
		suffix := pattern[1:]
		if !strings.HasSuffix(hostname, suffix) {
			return false
		}
		head := hostname[:len(hostname)-len(suffix)]
		return head != "" && !strings.Contains(head, ".")
	}
	return hostname == pattern
}
