package egress

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/openoxide/oxsupervise/policy"
)

func TestHostMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"example.com", "example.com", true},
		{"example.com", "EXAMPLE.com.", true},
		{"example.com", "www.example.com", false},
		{"example.com", "evil-example.com", false},
		{"example.com", "example.com.evil.test", false},
		{"*.example.com", "www.example.com", true},
		{"*.example.com", "a.b.example.com", false},
		{"*.example.com", "example.com", false},
		{"*.example.com", "wwwexample.com", false},
		{"*.example.com", ".example.com", false},
		{"**.example.com", "a.b.example.com", true},
		{"**.example.com", "www.example.com", true},
		{"**.example.com", "example.com", false},
		{"**.example.com", "evil-example.com", false},
		{"", "", false},
	} {
		if got := hostMatches(tc.pattern, tc.name); got != tc.want {
			t.Errorf("hostMatches(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestMatchHostPorts(t *testing.T) {
	rules := []policy.NetRule{
		{Host: "a.test", Ports: []policy.PortRange{{First: 443, Last: 443}}},
		{Host: "*.test", Ports: []policy.PortRange{{First: 80, Last: 80}}},
		{Prefix: netip.MustParsePrefix("10.0.0.0/8")},
	}
	ports, ok := matchHost(rules, "a.test")
	if !ok || len(ports) != 2 {
		t.Errorf("a.test: %v %v, want both rules' ports", ports, ok)
	}
	if _, ok := matchHost(rules, "b.c.test"); ok {
		t.Error("b.c.test matched")
	}
	ports, ok = matchHost([]policy.NetRule{{Host: "a.test"}}, "a.test")
	if !ok || len(ports) != 1 || ports[0] != (policy.PortRange{First: 0, Last: 65535}) {
		t.Errorf("rule without ports: %v", ports)
	}
}

func TestRebindingGuard(t *testing.T) {
	rules := []policy.NetRule{
		{Host: "a.test"},
		{Prefix: netip.MustParsePrefix("10.0.0.0/8")},
		{Prefix: netip.MustParsePrefix("0.0.0.0/0")},
	}
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"93.184.216.34", true},
		{"10.1.2.3", true}, // listed explicitly
		{"127.0.0.1", false},
		{"::ffff:127.0.0.1", false},
		{"169.254.169.254", false}, // 0.0.0.0/0 is not explicit
		{"192.168.1.1", false},
		{"::1", false},
		{"fd00:ec2::254", false},
		{"fe80::1", false},
		{"2001:db8::1", true},
		// NAT64 answers are judged by the IPv4 address they embed.
		{"64:ff9b::a9fe:a9fe", false}, // metadata through the translator
		{"64:ff9b::7f00:1", false},    // loopback through the translator
		{"64:ff9b::c0a8:101", false},  // 192.168.1.1
		{"64:ff9b::a01:203", true},    // 10.1.2.3, listed
		{"64:ff9b::5db8:d822", true},  // a public address
	} {
		got, _ := rebindingAllowed(netip.MustParseAddr(tc.addr), rules)
		if got != tc.want {
			t.Errorf("rebindingAllowed(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestTrieKeyPrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		bits   int
		addr   string
	}{
		{"10.1.2.3/8", 104, "::ffff:10.0.0.0"},
		{"::ffff:10.0.0.0/104", 104, "::ffff:10.0.0.0"},
		{"2001:db8::1/32", 32, "2001:db8::"},
		{"0.0.0.0/0", 96, "::ffff:0.0.0.0"},
	} {
		a, bits := trieKeyPrefix(netip.MustParsePrefix(tc.prefix))
		if bits != tc.bits || netip.AddrFrom16(a) != netip.MustParseAddr(tc.addr) {
			t.Errorf("%s: %s/%d, want %s/%d", tc.prefix, netip.AddrFrom16(a), bits, tc.addr, tc.bits)
		}
	}
}

func TestMergeRanges(t *testing.T) {
	have := []portRange{{First: 80, Last: 80}, {First: 443, Last: 443, Expires: 100}, {First: 8, Last: 8, Expires: 5}}
	got, err := mergeRanges(have, []portRange{{First: 443, Last: 443, Expires: 200}, {First: 22, Last: 22, Expires: 50}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []portRange{{First: 80, Last: 80}, {First: 443, Last: 443, Expires: 200}, {First: 22, Last: 22, Expires: 50}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("range %d: %v, want %v", i, got[i], want[i])
		}
	}
	// A permanent range is never shortened by a resolver answer.
	got, _ = mergeRanges([]portRange{{First: 1, Last: 2}}, []portRange{{First: 1, Last: 2, Expires: 9}}, 0)
	if got[0].Expires != 0 {
		t.Errorf("permanent range got an expiry: %v", got)
	}
	var many []portRange
	for i := range maxRanges + 1 {
		many = append(many, portRange{First: uint16(i), Last: uint16(i)})
	}
	if _, err := mergeRanges(nil, many, 0); err == nil {
		t.Error("more than maxRanges accepted")
	}
}

func TestValidateNetwork(t *testing.T) {
	p := netip.MustParsePrefix("10.0.0.0/8")
	for _, tc := range []struct {
		name string
		n    policy.Network
		ok   bool
	}{
		{"none", policy.Network{Policy: policy.NetNone}, true},
		{"allowlist", policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackSession, Allow: []policy.NetRule{{Prefix: p}, {Host: "*.a.test"}}}, true},
		{"bad policy", policy.Network{Policy: "open"}, false},
		{"bad loopback", policy.Network{Policy: policy.NetNone, Loopback: "some"}, false},
		{"empty rule", policy.Network{Policy: policy.NetAllowlist, Allow: []policy.NetRule{{}}}, false},
		{"bad host", policy.Network{Policy: policy.NetAllowlist, Allow: []policy.NetRule{{Host: "*.*.a.test"}}}, false},
		{"reversed", policy.Network{Policy: policy.NetAllowlist, Allow: []policy.NetRule{{Prefix: p, Ports: []policy.PortRange{{First: 2, Last: 1}}}}}, false},
	} {
		err := validateNetwork(tc.n)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestDecodeEvent(t *testing.T) {
	raw := make([]byte, eventSize)
	le := binary.LittleEndian
	le.PutUint32(raw[0:], 2) // OXS_SOURCE_NET
	le.PutUint64(raw[8:], 77)
	le.PutUint64(raw[16:], 9)
	le.PutUint64(raw[24:], 123)
	le.PutUint32(raw[32:], 1000)
	le.PutUint32(raw[36:], 1001)
	le.PutUint32(raw[40:], 5)
	raw[44], raw[45], raw[46], raw[47] = byte(OpConnect), byte(ReasonPort), 10, 6
	addr := netip.MustParseAddr("::ffff:198.18.0.1").As16()
	copy(raw[48:], addr[:])
	le.PutUint16(raw[64:], 8081)
	le.PutUint16(raw[66:], 1)
	copy(raw[72:], "curl")
	e, err := DecodeEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := Event{BootTimeNs: 123, CgroupID: 77, Suppressed: 9, PID: 1000, TID: 1001, UID: 5, Comm: "curl", Op: OpConnect,
		Reason: ReasonPort, Family: 10, Protocol: 6, SockType: 1,
		Destination: netip.MustParseAddrPort("198.18.0.1:8081")}
	if e != want {
		t.Errorf("decoded %+v, want %+v", e, want)
	}
	if _, err := DecodeEvent(raw[:10]); err == nil {
		t.Error("short record accepted")
	}
}

// A label with a dot inside ("evil.example" under com) arrives as the
// escaped name `evil\.example.com.`, which ends in ".example.com" as text
// but is not below example.com: it must not match.
func TestMatchHostRejectsEscapedNames(t *testing.T) {
	rules := []policy.NetRule{{Host: "**.example.com"}, {Host: "*.example.com"}, {Host: "example.com"}}
	q := new(dns.Msg)
	q.SetQuestion(`evil\.example.com.`, dns.TypeA)
	wire, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	var got dns.Msg
	if err := got.Unpack(wire); err != nil {
		t.Fatal(err)
	}
	name := got.Question[0].Name
	if dns.CountLabel(name) != 2 {
		t.Fatalf("%q has %d labels on the wire, want 2 (the test's premise)", name, dns.CountLabel(name))
	}
	for _, n := range []string{name, `a.evil\.example.com.`, `example\.com.`, `x\046example.com.`} {
		if ports, ok := matchHost(rules, normalizeName(n)); ok {
			t.Errorf("matchHost(%q) = %v: an escaped name matched", n, ports)
		}
	}
	if _, ok := matchHost(rules, "ok.example.com"); !ok {
		t.Error("ok.example.com no longer matches")
	}
}
