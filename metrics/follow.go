package metrics

import (
	"context"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

// Follow counts the records of the audit log at path as they are written,
// across rotations, until ctx ends. Records stamped before since (written
// before this daemon started, which a restarted daemon finds in the live
// file) are not counted: the counters start at zero with the process, as
// Prometheus counters do.
func (m *Metrics) Follow(ctx context.Context, path string, since time.Time) error {
	return audit.Tail(ctx, path, audit.TailOptions{
		Follow:  true,
		OnError: func(error) { m.logErrors.Inc() },
	}, func(r audit.Record, _ []byte) error {
		if r.Timestamp.Before(since) {
			return nil
		}
		m.Observe(&r)
		return nil
	})
}
