//go:build !linux

package audit

import "time"

// ProcEnricher returns a function that leaves records unchanged: only
// Linux has /proc to enrich from.
func ProcEnricher(time.Duration) func(*Record) {
	return func(*Record) {}
}

// Enricher leaves records unchanged: only Linux has /proc to enrich from.
type Enricher struct{}

// NewEnricher returns an Enricher.
func NewEnricher(time.Duration) *Enricher { return &Enricher{} }

// Prefetch does nothing.
func (*Enricher) Prefetch(int) {}

// Enrich leaves r unchanged.
func (*Enricher) Enrich(*Record) {}
