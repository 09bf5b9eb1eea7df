//go:build linux

package egress

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/openoxide/oxsupervise/policy"
)

// Every query the resolver answers for a name the session may resolve
// reaches OnAnswer once, with what it got; every refused one reaches
// OnRefusal once; no query reaches both. A malformed query and an answer
// whose addresses could not be admitted reach neither (their replies say
// REFUSED and SERVFAIL). The answers are counted from what the resolver
// sends (the reply itself is checked against the result).
func TestResolverAnswerCallback(t *testing.T) {
	upstream := testZone(t)
	allow := []policy.NetRule{{Host: "api.example.test"}, {Host: "cdn.example.test"}, {Host: "missing.example.test"},
		{Host: "rebind.example.test"}, {Host: "short.example.test"}}
	for _, tc := range []struct {
		what      string
		name      string
		qtype     uint16
		mutate    func(*dns.Msg)
		wantRcode int
		// wantAnswer is the result OnAnswer receives ("" when it is not
		// called), wantRefusal the reason OnRefusal receives.
		wantAnswer  AnswerResult
		wantRefusal string
	}{
		{"allowed name with an address", "api.example.test", dns.TypeA, nil, dns.RcodeSuccess, AnswerAddresses, ""},
		{"allowed name through a CNAME", "cdn.example.test", dns.TypeA, nil, dns.RcodeSuccess, AnswerAddresses, ""},
		{"allowed name without an address of the type", "api.example.test", dns.TypeAAAA, nil, dns.RcodeSuccess, AnswerNoData, ""},
		{"allowed name, a type that admits no address", "api.example.test", dns.TypeMX, nil, dns.RcodeSuccess, AnswerNoData, ""},
		{"allowed name upstream does not know", "missing.example.test", dns.TypeA, nil, dns.RcodeNameError, AnswerNXDomain, ""},
		{"name no rule allows", "evil-example.test", dns.TypeA, nil, dns.RcodeRefused, "", "not-allowed"},
		{"allowed name answered with loopback", "rebind.example.test", dns.TypeA, nil, dns.RcodeRefused, "", "rebinding"},
		{"class other than IN", "api.example.test", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS },
			dns.RcodeRefused, "", "not-allowed"},
		{"not a query", "api.example.test", dns.TypeA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify },
			dns.RcodeRefused, "", ""},
		{"addresses that cannot be admitted", "short.example.test", dns.TypeA, nil, dns.RcodeServerFailure, "", ""},
	} {
		t.Run(tc.what, func(t *testing.T) {
			var answers []DNSAnswer
			var refusals []DNSRefusal
			admit := func(_ uint64, name string, _ netip.Addr, _ []policy.PortRange, _ time.Duration) error {
				if name == "short.example.test" {
					return errors.New("allow map full")
				}
				return nil
			}
			r := NewResolver(ResolverConfig{Upstream: []string{upstream},
				OnAnswer:  func(a DNSAnswer) { answers = append(answers, a) },
				OnRefusal: func(d DNSRefusal) { refusals = append(refusals, d) },
			}, admit)
			s := &SessionResolver{r: r, cgroupID: 7, net: policy.Network{Policy: policy.NetAllowlist, Allow: allow},
				inflight: make(chan struct{}, 1)}
			q := new(dns.Msg)
			q.SetQuestion(dns.Fqdn(tc.name), tc.qtype)
			if tc.mutate != nil {
				tc.mutate(q)
			}
			w := &recordingWriter{}
			s.ServeDNS(w, q)
			if w.reply == nil || w.reply.Rcode != tc.wantRcode {
				t.Fatalf("reply %v, want rcode %s", w.reply, dns.RcodeToString[tc.wantRcode])
			}
			switch {
			case tc.wantAnswer != "":
				if len(answers) != 1 || answers[0] != (DNSAnswer{CgroupID: 7, Result: tc.wantAnswer}) {
					t.Errorf("OnAnswer got %+v, want one %s answer of cgroup 7", answers, tc.wantAnswer)
				}
				if got := answerResult(w.reply); got != tc.wantAnswer {
					t.Errorf("the reply sent is %s, the answer counted %s", got, tc.wantAnswer)
				}
			case len(answers) != 0:
				t.Errorf("OnAnswer got %+v, want no call", answers)
			}
			switch {
			case tc.wantRefusal != "":
				if len(refusals) != 1 || refusals[0].Reason != tc.wantRefusal {
					t.Errorf("OnRefusal got %+v, want one %s refusal", refusals, tc.wantRefusal)
				}
			case len(refusals) != 0:
				t.Errorf("OnRefusal got %+v, want no call", refusals)
			}
		})
	}
}
