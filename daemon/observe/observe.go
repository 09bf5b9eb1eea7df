// Package observe is the seam between the daemon (package daemon) and its
// exporters (package daemon/exporters: the Prometheus endpoint and the OTLP
// export of audit records): what the daemon offers them (Feed) and what
// they give back (Counters). It holds no logic of its own.
//
// The seam exists so that the oxsupervise CLI, which imports package
// daemon for its client, links neither Prometheus nor OpenTelemetry and
// their protocol stacks (their package initialization alone cost every
// CLI start milliseconds): only the daemon program, cmd/oxsupervised,
// passes exporters.Start as daemon.Options.Exporters.
package observe

import (
	"context"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/policy"
)

// Feed is what the daemon hands its exporters.
type Feed struct {
	// AuditPath is the audit log they follow: the one place every record
	// passes, so what they count and export agrees with the log.
	AuditPath string
	// Since is when the daemon started: records before it are not theirs.
	Since time.Time
	// Record writes a record of the exporters' own (the OTLP drop
	// summaries) to the audit log.
	Record func(*audit.Record) error
	// LiveSessions and PendingApprovals are the gauges of the daemon's
	// tables, read at scrape time.
	LiveSessions, PendingApprovals func() float64
	// Log is the daemon's log.
	Log zerolog.Logger
	// OTLPRetry bounds the OTLP exporter's retries of a batch (tests; 0:
	// package auditexport's default).
	OTLPRetry time.Duration
}

// Counters count what has no audit record, where it happens.
type Counters interface {
	// Instrument wraps the API's handler, counting its requests.
	Instrument(http.Handler) http.Handler
	// RefusedStart counts a session whose boundary could not be built,
	// by the layer that failed.
	RefusedStart(layer string)
	// ResolverAnswered counts a session resolver's answer, by result.
	ResolverAnswered(result string)
}

// Start starts the exporters cfg (the managed policy's [metrics] and
// [audit.otlp]) turns on, reading feed until ctx ends. counters is nil
// unless metrics are on; stop ends every exporter and waits for its last
// record to be written. A bad value, or an address that cannot be bound,
// is an error: an administrator who asked for an exporter is told at once.
type Start func(ctx context.Context, cfg policy.Observability, feed Feed) (counters Counters, stop func(), err error)
