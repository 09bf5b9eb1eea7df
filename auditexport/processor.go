package auditexport

import (
	"context"
	"sync"
	"time"

	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// queue is the LoggerProvider's processor: a bounded queue in front of
// the SDK exporter, one worker that batches and exports, and exact drop
// accounting (the SDK's BatchProcessor reports its drops only to the
// process-wide otel error handler).
type queue struct {
	exp      sdklog.Exporter
	ch       chan sdklog.Record
	batch    int
	interval time.Duration
	retryFor time.Duration
	// exported and dropped are told every outcome (counted by the
	// caller: metrics and the summaries in the local log).
	exported func(n int)
	dropped  func(n int, why string)
	failed   func(err error)
	done     chan struct{}
	flush    chan chan struct{}
	stopOnce sync.Once
}

func newQueue(exp sdklog.Exporter, o Options, exported func(int), dropped func(int, string), failed func(error)) *queue {
	q := &queue{exp: exp, ch: make(chan sdklog.Record, o.QueueSize), batch: o.BatchSize, interval: o.Interval,
		retryFor: o.RetryFor, exported: exported, dropped: dropped, failed: failed,
		done: make(chan struct{}), flush: make(chan chan struct{})}
	go q.run()
	return q
}

func (q *queue) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

// OnEmit queues a copy of the record (the SDK reuses it), or drops it
// when the queue is full.
func (q *queue) OnEmit(_ context.Context, r *sdklog.Record) error {
	select {
	case <-q.done:
		q.dropped(1, "exporter stopped")
		return nil
	default:
	}
	select {
	case q.ch <- r.Clone():
	default:
		q.dropped(1, "queue full")
	}
	return nil
}

func (q *queue) run() {
	tick := time.NewTicker(q.interval)
	defer tick.Stop()
	var pending []sdklog.Record
	send := func() {
		if len(pending) == 0 {
			return
		}
		// The exporter retries within this bound (its own backoff).
		ctx, cancel := context.WithTimeout(context.Background(), q.retryFor)
		err := q.exp.Export(ctx, pending)
		cancel()
		if err != nil {
			q.failed(err)
			q.dropped(len(pending), "export failed: "+err.Error())
		} else {
			q.exported(len(pending))
		}
		pending = pending[:0]
	}
	for {
		select {
		case r := <-q.ch:
			pending = append(pending, r)
			if len(pending) >= q.batch {
				send()
			}
		case <-tick.C:
			send()
		case ack := <-q.flush:
			for drained := false; !drained; {
				select {
				case r := <-q.ch:
					pending = append(pending, r)
					if len(pending) >= q.batch {
						send()
					}
				default:
					drained = true
				}
			}
			send()
			close(ack)
		case <-q.done:
			return
		}
	}
}

// ForceFlush exports everything queued.
func (q *queue) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flush <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown flushes, then stops the worker; records emitted afterwards are
// counted as dropped.
func (q *queue) Shutdown(ctx context.Context) error {
	err := q.ForceFlush(ctx)
	q.stopOnce.Do(func() { close(q.done) })
	if err != nil {
		// What the flush did not get to is dropped, and counted.
		n := len(q.ch)
		for i := 0; i < n; i++ {
			<-q.ch
		}
		q.dropped(n, "exporter stopped before the queue drained")
	}
	if serr := q.exp.Shutdown(ctx); err == nil {
		err = serr
	}
	return err
}
