//go:build !linux

package kernelaudit

import (
	"context"
	"errors"

	"github.com/openoxide/oxsupervise/audit"
)

// ErrUnavailable is returned by Open on every OS but Linux.
var ErrUnavailable = errors.New("kernel audit unavailable: the Linux audit subsystem is not supported on this OS")

// Reader is only implemented on Linux.
type Reader struct{}

// Open reports that kernel audit is Linux-only.
func Open(Options) (*Reader, error) { return nil, ErrUnavailable }

// EnabledByUs is false: nothing was enabled.
func (*Reader) EnabledByUs() bool { return false }

// Stats returns zero counters.
func (*Reader) Stats() Stats { return Stats{} }

// Run reports that kernel audit is Linux-only.
func (*Reader) Run(context.Context, func(audit.Record)) error { return ErrUnavailable }

// Close does nothing.
func (*Reader) Close() error { return nil }

// Hub is only implemented on Linux.
type Hub struct{}

// OpenHub reports that kernel audit is Linux-only.
func OpenHub(Options) (*Hub, error) { return nil, ErrUnavailable }

// StartHub returns a Hub that reads nothing.
func StartHub(Options) *Hub { return &Hub{} }

// Stats returns zero counters.
func (*Hub) Stats() Stats { return Stats{} }

// Close does nothing.
func (*Hub) Close() error { return nil }
