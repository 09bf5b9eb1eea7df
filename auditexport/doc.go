// Package auditexport exports the audit log's records to an OpenTelemetry
// collector as OTLP log records over HTTP/protobuf, with the OpenTelemetry
// Go SDK (a LoggerProvider whose processor is this package's bounded queue,
// in front of the SDK's otlploghttp exporter).
//
// The local JSON log stays the record of truth: Exporter follows it (as
// package metrics does) and exports what it reads, so a record the
// collector never gets is still in the log. Each record becomes one log
// record whose attributes are the record's ECS field names flattened
// ("event.action", "file.path", "oxsupervise.layer", ...), its body the
// message (or the action), its timestamp the record's @timestamp.
//
// Batching: up to Options.BatchSize records, or what arrived within
// Options.Interval. Retries: the exporter's backoff, bounded per batch by
// Options.RetryFor. Queue: Options.QueueSize records; a record that does
// not fit, and every record of a batch whose retries ran out, is dropped,
// counted (metrics.Metrics.OTLPDropped) and summed up in the local log as
// an events_lost record of layer "supervisor" with rule "audit.otlp" at
// most every Options.SummaryEvery and when the exporter stops: the drop
// count is never silent.
package auditexport
