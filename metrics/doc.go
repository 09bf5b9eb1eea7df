// Package metrics owns the daemon's Prometheus metrics: what they are
// named, what they count and the endpoint that serves them.
//
// Refusals, suppressed and lost events, sessions started and approval
// outcomes are counted from the audit records themselves (Observe), as
// Follow reads them back from the audit log: the log is the one place
// every record passes, whichever layer or session sink wrote it, so the
// counters agree with the log by construction and no layer counts on its
// own. What has no audit record is counted where it happens: API requests
// (Instrument), sessions refused to start (RefusedStart), the session
// resolvers' answers (ResolverAnswered, called by the resolver where it
// answers: egress.ResolverConfig.OnAnswer), and the gauges of
// live sessions and pending approvals (the daemon's own tables, read at
// scrape time).
//
// Labels are bounded sets: layer, operation (the audit record's
// event.action, a fixed vocabulary of the producers), kind, outcome, API
// route pattern, status code and resolver answer result. No path, hostname, user or session id is
// a label.
package metrics
