//go:build !linux

package egress

import (
	"errors"
	"net/netip"

	"github.com/openoxide/oxsupervise/policy"
)

var errUnsupported = errors.New("cgroup network enforcement is not supported on this OS")

// Enforcer is the Linux cgroup BPF network enforcer; unavailable here.
type Enforcer struct{}

// Config configures an Enforcer.
type Config struct {
	Resolver ResolverConfig
}

// Attach always fails on this OS.
func Attach(parentCgroupDir string, cfg Config) (*Enforcer, error) { return nil, errUnsupported }

func (e *Enforcer) AddSession(cgroupID uint64, n policy.Network) error       { return errUnsupported }
func (e *Enforcer) RemoveSession(cgroupID uint64) error                      { return errUnsupported }
func (e *Enforcer) Close() error                                             { return nil }
func (e *Enforcer) Hostname(cgroupID uint64, addr netip.Addr) (string, bool) { return "", false }
