// Package audit owns oxsupervise's audit record: its schema (Record, one
// JSON line per event, Elastic Common Schema names where ECS has one), the
// file sink that appends records to audit.jsonl with size-based rotation,
// the decoder and rotation-aware follower behind `oxsupervise audit tail`,
// and best-effort /proc enrichment of process fields.
//
// Producers (BPF ring buffer reader, resolver, kernel audit reader for
// Landlock, supervisor) fill the fields they know and the Kind/Layer of the
// event; Normalize derives the ECS categorisation so every producer files
// the same kind of event the same way. docs/audit-schema.md documents the
// schema; its examples are checked against this package by a test.
package audit
