package daemon

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/openoxide/oxsupervise/metrics"
	"github.com/openoxide/oxsupervise/policy"
)

// startMetrics serves the Prometheus endpoint the managed policy names
// ([metrics] listen; off when empty) until ctx ends, counting the audit
// log's records from now on. A bad value, or an address that cannot be
// bound, fails the start: an administrator who asked for metrics is told
// at once, not by an empty dashboard.
func (s *Server) startMetrics(ctx context.Context, started time.Time) error {
	cfg, err := policy.LoadMetrics(s.opts.ManagedDir)
	if err != nil {
		return fmt.Errorf("managed policy: %w", err)
	}
	if cfg.Listen == "" {
		return nil
	}
	m := metrics.New(
		func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(len(s.sessions)) },
		func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(len(s.pending)) },
	)
	addr, err := m.Serve(ctx, cfg.Listen)
	if err != nil {
		return fmt.Errorf("%w (metrics.listen, %s)", err, cfg.Source)
	}
	s.metrics = m
	go func() {
		if err := m.Follow(ctx, s.opts.AuditPath, started); err != nil && ctx.Err() == nil {
			s.zl.Error().Err(err).Msg("metrics: reading the audit log stopped; refusal counters are frozen")
		}
	}()
	s.zl.Info().Str("listen", addr).Str("set_by", cfg.Source).Msg("serving Prometheus metrics on /metrics")
	return nil
}

// instrument counts the API's requests when metrics are on.
func (s *Server) instrument(h http.Handler) http.Handler {
	if s.metrics == nil {
		return h
	}
	return s.metrics.Instrument(h)
}
