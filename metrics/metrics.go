package metrics

import (
	"regexp"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/openoxide/oxsupervise/audit"
)

// Metrics holds the daemon's collectors in their own registry (no global
// state: two daemons in one test binary do not share counters).
type Metrics struct {
	reg *prometheus.Registry

	records       *prometheus.CounterVec
	refusals      *prometheus.CounterVec
	resolverRefs  prometheus.Counter
	resolverAns   *prometheus.CounterVec
	suppressed    *prometheus.CounterVec
	lost          *prometheus.CounterVec
	ringLost      prometheus.Counter
	kauditLost    prometheus.Counter
	started       prometheus.Counter
	refusedStart  *prometheus.CounterVec
	approvalsReq  prometheus.Counter
	approvals     *prometheus.CounterVec
	requests      *prometheus.CounterVec
	logErrors     prometheus.Counter
	otlpDropped   prometheus.Counter
	otlpExported  prometheus.Counter
	otlpSendFails prometheus.Counter
}

// New returns the collectors, registered with the Go runtime and process
// collectors. live and pending are read at scrape time (the daemon's
// session and approval tables); nil leaves the gauge out.
func New(live, pending func() float64) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	c := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "oxsupervise", Name: name, Help: help})
		m.reg.MustRegister(x)
		return x
	}
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		x := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "oxsupervise", Name: name, Help: help}, labels)
		m.reg.MustRegister(x)
		return x
	}
	m.records = cv("audit_records_total", "Audit records read back from the audit log, by kind.", "kind")
	m.refusals = cv("refusals_total", "Operations refused in sessions (denial records), by enforcement layer and operation.", "layer", "operation")
	m.resolverRefs = c("resolver_refusals_total", "DNS lookups the session resolvers refused (denial records of layer resolver).")
	m.resolverAns = cv("resolver_answers_total", "DNS queries the session resolvers answered for names the sessions may resolve, by result (addresses, nodata, nxdomain); refused ones are resolver_refusals_total.", "result")
	m.suppressed = cv("events_suppressed_total", "Refusals flood control summarised instead of recording one by one, by layer.", "layer")
	m.lost = cv("events_lost_total", "Events the kernel or a reader could not hand over (events_lost records), by layer.", "layer")
	m.ringLost = c("ring_buffer_lost_total", "Refusal events lost in the BPF ring buffer (events_lost of layers bpf-lsm and cgroup).")
	m.kauditLost = c("kernel_audit_lost_total", "Landlock records lost between the kernel audit subsystem and the daemon.")
	m.started = c("sessions_started_total", "Sessions started (session_start records).")
	m.refusedStart = cv("sessions_refused_total", "Sessions that did not start because their boundary could not be built, by the layer that failed.", "layer")
	m.approvalsReq = c("approvals_requested_total", "Approval requests (pending approval records).")
	m.approvals = cv("approvals_total", "Approval outcomes, by outcome (once, always, reject, timeout, ...).", "outcome")
	m.requests = cv("api_requests_total", "API requests served, by route and HTTP status code.", "route", "code")
	m.logErrors = c("audit_log_read_errors_total", "Audit log lines that did not decode, and rotation gaps, while counting.")
	m.otlpExported = c("otlp_exported_records_total", "Audit records accepted by the OTLP collector.")
	m.otlpDropped = c("otlp_dropped_records_total", "Audit records not exported over OTLP (queue full, or retries exhausted); they stay in the local log.")
	m.otlpSendFails = c("otlp_export_failures_total", "Failed OTLP export attempts (each batch is retried a bounded number of times).")
	if live != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "oxsupervise", Name: "sessions_live",
			Help: "Sessions the daemon runs or holds now."}, live))
	}
	if pending != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "oxsupervise", Name: "approvals_pending",
			Help: "Approval requests waiting for an answer now."}, pending))
	}
	m.reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry the endpoint serves (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// labelWord keeps label values to the producers' vocabulary: a value that
// is not a short lowercase word becomes "other", so that a malformed
// record cannot create unbounded series.
var labelWord = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

func word(s string) string {
	if labelWord.MatchString(s) {
		return s
	}
	return "other"
}

// Observe counts one audit record.
func (m *Metrics) Observe(r *audit.Record) {
	m.records.WithLabelValues(word(string(r.Ox.Kind))).Inc()
	layer := word(string(r.Ox.Layer))
	switch r.Ox.Kind {
	case audit.KindDenial:
		m.refusals.WithLabelValues(layer, word(r.Event.Action)).Inc()
		if r.Ox.Layer == audit.LayerResolver {
			m.resolverRefs.Inc()
		}
	case audit.KindSuppressed:
		m.suppressed.WithLabelValues(layer).Add(float64(r.Ox.Suppressed))
	case audit.KindEventsLost:
		n := float64(r.Ox.EventsLost)
		m.lost.WithLabelValues(layer).Add(n)
		switch r.Ox.Layer {
		case audit.LayerBPFLSM, audit.LayerCgroupNet:
			m.ringLost.Add(n)
		case audit.LayerLandlock:
			m.kauditLost.Add(n)
		}
	case audit.KindSessionStart:
		m.started.Inc()
	case audit.KindApproval:
		if r.Ox.Approval == nil {
			return
		}
		if r.Ox.Approval.Decision == "pending" {
			m.approvalsReq.Inc()
		} else {
			m.approvals.WithLabelValues(word(r.Ox.Approval.Decision)).Inc()
		}
	}
}

// RefusedStart counts a session whose boundary could not be built.
func (m *Metrics) RefusedStart(layer string) {
	if m != nil {
		m.refusedStart.WithLabelValues(word(layer)).Inc()
	}
}

// ResolverAnswered counts one query a session resolver answered, by its
// result (egress.AnswerResult). The resolver calls it as it answers
// (ResolverConfig.OnAnswer): answers leave no audit record to count.
func (m *Metrics) ResolverAnswered(result string) {
	if m != nil {
		m.resolverAns.WithLabelValues(word(result)).Inc()
	}
}

// OTLP counters, for the audit exporter.
func (m *Metrics) OTLPExported(n int) {
	if m != nil {
		m.otlpExported.Add(float64(n))
	}
}

func (m *Metrics) OTLPDropped(n int) {
	if m != nil {
		m.otlpDropped.Add(float64(n))
	}
}

func (m *Metrics) OTLPSendFailed() {
	if m != nil {
		m.otlpSendFails.Inc()
	}
}
