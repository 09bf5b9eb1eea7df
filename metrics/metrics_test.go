package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/openoxide/oxsupervise/audit"
)

func TestObserve(t *testing.T) {
	m := New(func() float64 { return 2 }, func() float64 { return 1 })
	for _, r := range []audit.Record{
		{Event: audit.Event{Action: "open"}, Ox: audit.Ox{Kind: audit.KindDenial, Layer: audit.LayerBPFLSM}},
		{Event: audit.Event{Action: "open"}, Ox: audit.Ox{Kind: audit.KindDenial, Layer: audit.LayerBPFLSM}},
		{Event: audit.Event{Action: "dns"}, Ox: audit.Ox{Kind: audit.KindDenial, Layer: audit.LayerResolver}},
		{Event: audit.Event{Action: "/etc/passwd"}, Ox: audit.Ox{Kind: audit.KindDenial, Layer: audit.LayerLandlock}},
		{Ox: audit.Ox{Kind: audit.KindSuppressed, Layer: audit.LayerCgroupNet, Suppressed: 40}},
		{Ox: audit.Ox{Kind: audit.KindEventsLost, Layer: audit.LayerCgroupNet, EventsLost: 7}},
		{Ox: audit.Ox{Kind: audit.KindEventsLost, Layer: audit.LayerLandlock, EventsLost: 3}},
		{Ox: audit.Ox{Kind: audit.KindSessionStart}},
		{Ox: audit.Ox{Kind: audit.KindApproval, Approval: &audit.Approval{Decision: "pending"}}},
		{Ox: audit.Ox{Kind: audit.KindApproval, Approval: &audit.Approval{Decision: "reject"}}},
	} {
		m.Observe(&r)
	}
	m.RefusedStart("network")
	for _, result := range []string{"addresses", "addresses", "nxdomain", "api.example.test"} {
		m.ResolverAnswered(result)
	}
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"refusals bpf-lsm open", testutil.ToFloat64(m.refusals.WithLabelValues("bpf-lsm", "open")), 2},
		{"refusals resolver dns", testutil.ToFloat64(m.refusals.WithLabelValues("resolver", "dns")), 1},
		{"an operation outside the vocabulary is other", testutil.ToFloat64(m.refusals.WithLabelValues("landlock", "other")), 1},
		{"resolver refusals", testutil.ToFloat64(m.resolverRefs), 1},
		{"suppressed cgroup", testutil.ToFloat64(m.suppressed.WithLabelValues("cgroup")), 40},
		{"ring buffer lost", testutil.ToFloat64(m.ringLost), 7},
		{"kernel audit lost", testutil.ToFloat64(m.kauditLost), 3},
		{"sessions started", testutil.ToFloat64(m.started), 1},
		{"approvals requested", testutil.ToFloat64(m.approvalsReq), 1},
		{"approvals rejected", testutil.ToFloat64(m.approvals.WithLabelValues("reject")), 1},
		{"sessions refused", testutil.ToFloat64(m.refusedStart.WithLabelValues("network")), 1},
		{"resolver answers with addresses", testutil.ToFloat64(m.resolverAns.WithLabelValues("addresses")), 2},
		{"resolver answers nxdomain", testutil.ToFloat64(m.resolverAns.WithLabelValues("nxdomain")), 1},
		{"a result outside the vocabulary is other", testutil.ToFloat64(m.resolverAns.WithLabelValues("other")), 1},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	problems, err := promlint.NewWithMetricFamilies(mustGather(t, m)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func mustGather(t *testing.T, m *Metrics) []*dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}
