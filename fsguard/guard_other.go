//go:build !linux

package fsguard

import (
	"errors"
	"os"
	"runtime"

	"github.com/openoxide/oxsupervise/policy"
)

var errUnsupported = errors.New("fsguard: BPF-LSM filesystem enforcement is not supported on " + runtime.GOOS)

// PrivateMount is a filesystem mounted only in the session's own mount
// namespace (see the Linux build).
type PrivateMount struct {
	Path string
	Root *os.File
}

// SessionOptions are what AddSessionWith knows of a session beyond its
// policy (see the Linux build).
type SessionOptions struct {
	CheckAtEnd bool
	Private    []PrivateMount
}

// Guard is unavailable on this OS: nothing can load it.
type Guard struct{}

func (g *Guard) Hooks() []string                                      { return nil }
func (g *Guard) AddSession(cgroupID uint64, c *policy.Compiled) error { return errUnsupported }
func (g *Guard) AddSessionWith(cgroupID uint64, c *policy.Compiled, opts SessionOptions) error {
	return errUnsupported
}
func (g *Guard) RemoveSession(cgroupID uint64) error { return errUnsupported }
func (g *Guard) Decode(sample []byte) (Event, error) { return Event{}, errUnsupported }
func (g *Guard) Close() error                        { return nil }
