package daemon

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/openoxide/oxsupervise/auditexport"
	"github.com/openoxide/oxsupervise/egress"
	"github.com/openoxide/oxsupervise/metrics"
	"github.com/openoxide/oxsupervise/policy"
)

// startObservability starts what the managed policy turns on: the
// Prometheus endpoint ([metrics] listen) and the OTLP export of audit
// records ([audit.otlp] endpoint), both reading the audit log from now on.
// A bad value, or an address that cannot be bound, fails the start: an
// administrator who asked for them is told at once, not by an empty
// dashboard. stop ends both and waits for the exporter's last drop
// summary to be written (before the audit sink closes).
func (s *Server) startObservability(ctx context.Context, started time.Time) (stop func(), err error) {
	cfg, err := policy.LoadObservability(s.opts.ManagedDir)
	if err != nil {
		return nil, fmt.Errorf("managed policy: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() { cancel(); wg.Wait() }
	if err := s.startMetrics(ctx, cfg, started); err != nil {
		stop()
		return nil, err
	}
	if cfg.OTLPEndpoint != "" {
		exp, err := auditexport.New(auditexport.Options{
			Endpoint: cfg.OTLPEndpoint, RetryFor: s.opts.otlpRetry, Record: s.sink.Write, Metrics: s.metrics,
			Warn: func(err error) { s.zl.Warn().Err(err).Msg("OTLP export of audit records") },
		})
		if err != nil {
			stop()
			return nil, fmt.Errorf("%w (%s)", err, cfg.OTLPSource)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := exp.Follow(ctx, s.opts.AuditPath, started); err != nil && ctx.Err() == nil {
				s.zl.Error().Err(err).Msg("OTLP export: reading the audit log stopped")
			}
		}()
		s.zl.Info().Str("endpoint", cfg.OTLPEndpoint).Str("set_by", cfg.OTLPSource).Msg("exporting audit records over OTLP")
	}
	return stop, nil
}

// startMetrics serves /metrics on cfg.MetricsListen (nothing when empty)
// until ctx ends, counting the audit log's records from now on.
func (s *Server) startMetrics(ctx context.Context, cfg policy.Observability, started time.Time) error {
	if cfg.MetricsListen == "" {
		return nil
	}
	m := metrics.New(
		func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(len(s.sessions)) },
		func() float64 { return float64(len(s.pending.list(func(*Approval) bool { return true }))) },
	)
	addr, err := m.Serve(ctx, cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("%w (metrics.listen, %s)", err, cfg.MetricsSource)
	}
	s.metrics = m
	go func() {
		if err := m.Follow(ctx, s.opts.AuditPath, started); err != nil && ctx.Err() == nil {
			s.zl.Error().Err(err).Msg("metrics: reading the audit log stopped; refusal counters are frozen")
		}
	}()
	s.zl.Info().Str("listen", addr).Str("set_by", cfg.MetricsSource).Msg("serving Prometheus metrics on /metrics")
	return nil
}

// resolverAnswered is the network layer's resolver answer callback when
// metrics are on (nil otherwise): answers leave no audit record, so the
// resolver reports them where it answers.
func (s *Server) resolverAnswered() func(egress.DNSAnswer) {
	if s.metrics == nil {
		return nil
	}
	m := s.metrics
	return func(a egress.DNSAnswer) { m.ResolverAnswered(string(a.Result)) }
}

// instrument counts the API's requests when metrics are on.
func (s *Server) instrument(h http.Handler) http.Handler {
	if s.metrics == nil {
		return h
	}
	return s.metrics.Instrument(h)
}
