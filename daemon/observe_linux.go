//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/openoxide/oxsupervise/daemon/observe"
	"github.com/openoxide/oxsupervise/egress"
	"github.com/openoxide/oxsupervise/policy"
)

// errNoExporters: the managed policy turns an exporter on, and this
// daemon was started without them (Options.Exporters).
var errNoExporters = errors.New("this daemon has no exporters (run it as the daemon program, oxsupervised)")

// startObservability starts what the managed policy turns on (the
// Prometheus endpoint, the OTLP export of audit records) through
// Options.Exporters, both reading the audit log from started on. A bad
// value fails the start, as does a policy asking for exporters this daemon
// does not have. stop ends them and waits for the exporter's last drop
// summary to be written (before the audit sink closes).
func (s *Server) startObservability(ctx context.Context, started time.Time) (stop func(), err error) {
	cfg, err := policy.LoadObservability(s.opts.ManagedDir)
	if err != nil {
		return nil, fmt.Errorf("managed policy: %w", err)
	}
	if cfg.MetricsListen == "" && cfg.OTLPEndpoint == "" {
		return func() {}, nil
	}
	if s.opts.Exporters == nil {
		var on []string
		if cfg.MetricsListen != "" {
			on = append(on, "metrics.listen ("+cfg.MetricsSource+")")
		}
		if cfg.OTLPEndpoint != "" {
			on = append(on, "audit.otlp.endpoint ("+cfg.OTLPSource+")")
		}
		return nil, fmt.Errorf("managed policy turns on %s: %w", strings.Join(on, " and "), errNoExporters)
	}
	counters, stop, err := s.opts.Exporters(ctx, cfg, observe.Feed{
		AuditPath: s.opts.AuditPath, Since: started, Record: s.sink.Write,
		LiveSessions:     func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(len(s.sessions)) },
		PendingApprovals: func() float64 { return float64(len(s.pending.list(func(*Approval) bool { return true }))) },
		Log:              s.zl, OTLPRetry: s.opts.otlpRetry,
	})
	if err != nil {
		return nil, err
	}
	s.counters = counters
	return stop, nil
}

// resolverAnswered is the network layer's resolver answer callback when
// metrics are on (nil otherwise): answers leave no audit record, so the
// resolver reports them where it answers.
func (s *Server) resolverAnswered() func(egress.DNSAnswer) {
	if s.counters == nil {
		return nil
	}
	c := s.counters
	return func(a egress.DNSAnswer) { c.ResolverAnswered(string(a.Result)) }
}

// refusedStart counts a session whose boundary could not be built, when
// metrics are on.
func (s *Server) refusedStart(layer string) {
	if s.counters != nil {
		s.counters.RefusedStart(layer)
	}
}

// instrument counts the API's requests when metrics are on.
func (s *Server) instrument(h http.Handler) http.Handler {
	if s.counters == nil {
		return h
	}
	return s.counters.Instrument(h)
}
