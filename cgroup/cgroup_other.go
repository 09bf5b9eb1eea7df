//go:build !linux

package cgroup

import (
	"context"
	"errors"
	"os"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
)

var errUnsupported = errors.New("cgroup v2 sessions are not supported on this OS")

func FindMounts() (Mounts, error)                                     { return Mounts{}, errUnsupported }
func Cgroup2Mount() (string, error)                                   { return "", errUnsupported }
func Controllers(dir string) ([]string, error)                        { return nil, errUnsupported }
func SubtreeControl(dir string) ([]string, error)                     { return nil, errUnsupported }
func ID(dir string) (uint64, error)                                   { return 0, errUnsupported }
func NewSession(cfg Config, id string, limits Limits) (*Group, error) { return nil, errUnsupported }
func OpenSession(cfg Config, id string) (*Group, error)               { return nil, errUnsupported }
func ListSessions(cfg Config) ([]string, error)                       { return nil, errUnsupported }
func (c Config) Resolved() (Config, error)                            { return c, errUnsupported }
func (c Config) ResolvedIn([]mountinfo.Mount) (Config, error)         { return c, errUnsupported }
func ParentDir(cfg Config) (string, error)                            { return "", errUnsupported }
func CgroupOf(pid int) (string, error)                                { return "", errUnsupported }
func MigrateSelfInPlace(mount string) error                           { return errUnsupported }
func SessionOf(cfg Config, pid int) (string, bool, error)             { return "", false, errUnsupported }
func SessionChain(cfg Config, pid int) ([]string, error)              { return nil, errUnsupported }
func Tasks(pid int) ([]int, error)                                    { return nil, errUnsupported }
func Children(pid int) ([]int, error)                                 { return nil, errUnsupported }
func Descendants(pid int) ([]int, error)                              { return nil, errUnsupported }

func (g *Group) OpenFD() (*os.File, error)                { return nil, errUnsupported }
func (g *Group) AddProcess(pid int) error                 { return errUnsupported }
func (g *Group) AddThread(tid int) error                  { return errUnsupported }
func (g *Group) Procs() ([]int, error)                    { return nil, errUnsupported }
func (g *Group) Threads() ([]int, error)                  { return nil, errUnsupported }
func (g *Group) Type() (string, error)                    { return "", errUnsupported }
func (g *Group) Populated() (bool, error)                 { return false, errUnsupported }
func (g *Group) Frozen() (bool, error)                    { return false, errUnsupported }
func (g *Group) Freeze(ctx context.Context) error         { return errUnsupported }
func (g *Group) Thaw(ctx context.Context) error           { return errUnsupported }
func (g *Group) Kill(ctx context.Context) error           { return errUnsupported }
func (g *Group) WaitEmpty(ctx context.Context) error      { return errUnsupported }
func (g *Group) WaitEnd(ctx context.Context) (End, error) { return 0, errUnsupported }
func (g *Group) Remove(ctx context.Context) error         { return errUnsupported }
func (g *Group) RemoveIfEmpty() (bool, error)             { return false, errUnsupported }
