//go:build !linux

package fsguard

import (
	"errors"
	"runtime"

	"github.com/openoxide/oxsupervise/policy"
)

// ErrClosed is returned by ReadEvent after Close.
var ErrClosed = errors.New("fsguard: closed")

var errUnsupported = errors.New("fsguard: BPF-LSM filesystem enforcement is not supported on " + runtime.GOOS)

// Guard is unavailable on this OS; Load always fails.
type Guard struct{}

// Load reports that BPF-LSM does not exist on this OS.
func Load() (*Guard, error) { return nil, errUnsupported }

func (g *Guard) Hooks() []string                                      { return nil }
func (g *Guard) AddSession(cgroupID uint64, c *policy.Compiled) error { return errUnsupported }
func (g *Guard) RemoveSession(cgroupID uint64) error                  { return errUnsupported }
func (g *Guard) ReadEvent() (Event, error)                            { return Event{}, errUnsupported }
func (g *Guard) EventsLost() (uint64, error)                          { return 0, errUnsupported }
func (g *Guard) Close() error                                         { return nil }
