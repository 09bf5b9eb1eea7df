//go:build !linux

package session

import (
	"context"
	"errors"

	"github.com/openoxide/oxsupervise/cgroup"
)

var errNotSupported = errors.New("sessions are not supported on this OS")

// Slot is a session started ahead of its request (slot_linux.go); there
// are none on this OS.
type Slot struct{}

// Run runs a command in a new session.
func Run(ctx context.Context, opts RunOptions) (int, error) { return 0, errNotSupported }

// Attach confines a running process tree.
func Attach(ctx context.Context, opts AttachOptions) (*Entry, error) { return nil, errNotSupported }

// List joins the registry with the session groups.
func List(cfg cgroup.Config, reg Registry) ([]Status, error) { return nil, errNotSupported }

// Stop kills and removes a session.
func Stop(ctx context.Context, cfg cgroup.Config, reg Registry, id string) error {
	return errNotSupported
}
