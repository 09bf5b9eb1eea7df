//go:build !linux

package kernelaudit

import (
	"context"
	"errors"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
)

// Options configure a Reader (Linux only).
type Options struct {
	SessionOfPID     func(pid int) (string, bool)
	Cgroup           cgroup.Config
	FlushAfter       time.Duration
	KeepUnattributed bool
	RestoreOnClose   bool
	MinBacklogLimit  int
}

// Stats count what a Reader saw.
type Stats struct {
	Messages, Unparsable, Denials, Unattributed, Overflows, KernelLost uint64
}

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
