package auditexport

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/metrics"
)

// Options configure an Exporter. Zero values select the defaults.
type Options struct {
	// Endpoint is the collector's OTLP/HTTP URL (audit.otlp.endpoint);
	// /v1/logs is used when it has no path.
	Endpoint string
	// QueueSize bounds the records waiting for export (default 8192).
	QueueSize int
	// BatchSize is the most records one request carries (default 512).
	BatchSize int
	// Interval is the longest a record waits for its batch (default 1s).
	Interval time.Duration
	// RetryFor bounds the retries of one batch (default 30s); then the
	// batch is dropped and counted.
	RetryFor time.Duration
	// SummaryEvery is how often at most a drop summary is written to the
	// local log while records are being dropped (default 10s); the last
	// one is written when the exporter stops.
	SummaryEvery time.Duration
	// Record writes a drop summary to the local audit log (required).
	Record func(*audit.Record) error
	// Metrics, when set, counts exported and dropped records.
	Metrics *metrics.Metrics
	// Warn receives export failures (the daemon's log); nil ignores them.
	Warn func(error)
}

func (o Options) withDefaults() Options {
	if o.QueueSize <= 0 {
		o.QueueSize = 8192
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 512
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.RetryFor <= 0 {
		o.RetryFor = 30 * time.Second
	}
	if o.SummaryEvery <= 0 {
		o.SummaryEvery = 10 * time.Second
	}
	if o.Warn == nil {
		o.Warn = func(error) {}
	}
	return o
}

// Exporter exports audit records over OTLP.
type Exporter struct {
	opts     Options
	provider *sdklog.LoggerProvider
	logger   otellog.Logger

	mu          sync.Mutex
	dropped     uint64 // since the last summary
	lastReason  string
	lastSummary time.Time
}

// New builds the OTLP pipeline for opts.Endpoint; nothing is sent yet.
func New(opts Options) (*Exporter, error) {
	opts = opts.withDefaults()
	if opts.Record == nil {
		return nil, fmt.Errorf("auditexport: Options.Record is required")
	}
	u, err := url.Parse(opts.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("audit.otlp.endpoint %q: want an http:// or https:// URL", opts.Endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/logs"
	}
	exp, err := otlploghttp.New(context.Background(),
		otlploghttp.WithEndpointURL(u.String()),
		otlploghttp.WithTimeout(opts.RetryFor),
		otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: true, InitialInterval: 500 * time.Millisecond,
			MaxInterval: 5 * time.Second, MaxElapsedTime: opts.RetryFor}))
	if err != nil {
		return nil, fmt.Errorf("audit.otlp.endpoint %s: %w", u, err)
	}
	e := &Exporter{opts: opts, lastSummary: time.Now()}
	host, _ := os.Hostname()
	res := resource.NewSchemaless(attribute.String("service.name", "oxsupervise"), attribute.String("host.name", host))
	q := newQueue(exp, opts, opts.Metrics.OTLPExported, e.drop, func(err error) {
		opts.Metrics.OTLPSendFailed()
		opts.Warn(err)
	})
	e.provider = sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(q))
	e.logger = e.provider.Logger("github.com/openoxide/oxsupervise/auditexport")
	return e, nil
}

// drop counts n records that will not reach the collector.
func (e *Exporter) drop(n int, why string) {
	if n == 0 {
		return
	}
	e.opts.Metrics.OTLPDropped(n)
	e.mu.Lock()
	e.dropped += uint64(n)
	e.lastReason = why
	e.mu.Unlock()
}

// summarize writes the pending drop count to the local log when there is
// one and the last summary is older than SummaryEvery (or always, with
// force).
func (e *Exporter) summarize(force bool) {
	e.mu.Lock()
	n, why := e.dropped, e.lastReason
	if n == 0 || (!force && time.Since(e.lastSummary) < e.opts.SummaryEvery) {
		e.mu.Unlock()
		return
	}
	e.dropped, e.lastSummary = 0, time.Now()
	e.mu.Unlock()
	r := &audit.Record{
		Timestamp: time.Now(),
		Message: fmt.Sprintf("%d audit records were not exported to the OTLP collector at %s (%s); they are in this log",
			n, e.opts.Endpoint, why),
		Ox: audit.Ox{Kind: audit.KindEventsLost, Layer: audit.LayerSupervisor, Rule: "audit.otlp", EventsLost: n},
	}
	if err := e.opts.Record(r); err != nil {
		e.opts.Warn(fmt.Errorf("OTLP drop summary of %d records not written: %w", n, err))
		e.mu.Lock()
		e.dropped += n
		e.mu.Unlock()
	}
}

// Emit exports one record (its JSON line gives the attributes).
func (e *Exporter) Emit(ctx context.Context, r *audit.Record, line []byte) {
	lr, err := logRecord(r, line)
	if err != nil {
		e.drop(1, err.Error())
		return
	}
	e.logger.Emit(ctx, lr)
}

// Follow exports the records of the audit log at path written at or after
// since, across rotations, until ctx ends; then it flushes what is queued
// (for at most RetryFor) and writes the last drop summary.
func (e *Exporter) Follow(ctx context.Context, path string, since time.Time) error {
	tick := time.NewTicker(e.opts.Interval)
	defer tick.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				e.summarize(false)
			}
		}
	}()
	err := audit.Tail(ctx, path, audit.TailOptions{Follow: true, OnError: e.opts.Warn}, func(r audit.Record, line []byte) error {
		if !r.Timestamp.Before(since) {
			e.Emit(context.Background(), &r, line)
		}
		return nil
	})
	e.Close()
	return err
}

// Close flushes the queue (at most RetryFor), stops the pipeline and
// writes the last drop summary.
func (e *Exporter) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.RetryFor+time.Second)
	defer cancel()
	if err := e.provider.Shutdown(ctx); err != nil {
		e.opts.Warn(fmt.Errorf("OTLP exporter shutdown: %w", err))
	}
	e.summarize(true)
}
