// Package bpfring reads the one ring buffer every oxsupervise BPF program
// reports refusals in (bpf/events.h, DESIGN §5). It owns the shared event
// maps (loader.EventMaps) and the only reader of the ring: it hands each
// record to the consumer of its source (the filesystem or the network
// layer), turns the kernel's per-CPU count of failed reservations into
// losses per source, and keeps the per-session flood-control buckets
// whose counts make a session's refusals add up exactly: records read plus
// suppressed plus what was sent but never read.
package bpfring
