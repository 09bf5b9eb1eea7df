//go:build !linux

package audit

import "time"

// ProcEnricher returns a function that leaves records unchanged: only
// Linux has /proc to enrich from.
func ProcEnricher(time.Duration) func(*Record) {
	return func(*Record) {}
}
