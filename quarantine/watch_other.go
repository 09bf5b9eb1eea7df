//go:build !linux

package quarantine

import "errors"

// Watch is the Landlock path's watch of protected names (Linux only).
type Watch struct{}

// Start is not supported outside Linux.
func Start(opts Options) (*Watch, error) { return nil, errors.New("quarantine: Linux only") }

// Close returns nothing outside Linux.
func (w *Watch) Close() []Moved { return nil }
