// Package exporters starts the daemon's exporters beyond its audit log, as
// the managed policy turns them on: the Prometheus endpoint (package
// metrics, [metrics] listen) and the OTLP export of audit records (package
// auditexport, [audit.otlp] endpoint). Start is an observe.Start; the
// daemon program (cmd/oxsupervised) is the only one that links it.
package exporters

import (
	"context"
	"fmt"
	"sync"

	"github.com/openoxide/oxsupervise/auditexport"
	"github.com/openoxide/oxsupervise/daemon/observe"
	"github.com/openoxide/oxsupervise/metrics"
	"github.com/openoxide/oxsupervise/policy"
)

var _ observe.Start = Start

// Start starts what cfg turns on, both reading the audit log from
// feed.Since. counters is the metrics (nil when they are off).
func Start(ctx context.Context, cfg policy.Observability, feed observe.Feed) (counters observe.Counters, stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() { cancel(); wg.Wait() }
	m, err := startMetrics(ctx, cfg, feed)
	if err != nil {
		stop()
		return nil, nil, err
	}
	if cfg.OTLPEndpoint != "" {
		exp, err := auditexport.New(auditexport.Options{
			Endpoint: cfg.OTLPEndpoint, RetryFor: feed.OTLPRetry, Record: feed.Record, Metrics: m,
			Warn: func(err error) { feed.Log.Warn().Err(err).Msg("OTLP export of audit records") },
		})
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("%w (%s)", err, cfg.OTLPSource)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := exp.Follow(ctx, feed.AuditPath, feed.Since); err != nil && ctx.Err() == nil {
				feed.Log.Error().Err(err).Msg("OTLP export: reading the audit log stopped")
			}
		}()
		feed.Log.Info().Str("endpoint", cfg.OTLPEndpoint).Str("set_by", cfg.OTLPSource).Msg("exporting audit records over OTLP")
	}
	if m == nil {
		// Not a nil *metrics.Metrics in a non-nil interface.
		return nil, stop, nil
	}
	return m, stop, nil
}

// startMetrics serves /metrics on cfg.MetricsListen (nothing when empty)
// until ctx ends, counting the audit log's records from feed.Since.
func startMetrics(ctx context.Context, cfg policy.Observability, feed observe.Feed) (*metrics.Metrics, error) {
	if cfg.MetricsListen == "" {
		return nil, nil
	}
	m := metrics.New(feed.LiveSessions, feed.PendingApprovals)
	addr, err := m.Serve(ctx, cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("%w (metrics.listen, %s)", err, cfg.MetricsSource)
	}
	go func() {
		if err := m.Follow(ctx, feed.AuditPath, feed.Since); err != nil && ctx.Err() == nil {
			feed.Log.Error().Err(err).Msg("metrics: reading the audit log stopped; refusal counters are frozen")
		}
	}()
	feed.Log.Info().Str("listen", addr).Str("set_by", cfg.MetricsSource).Msg("serving Prometheus metrics on /metrics")
	return m, nil
}
