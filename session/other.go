//go:build !linux

package session

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/planner"
	"github.com/openoxide/oxsupervise/policy"
)

var errNotSupported = errors.New("sessions are not supported on this OS")

// LauncherVerb is the hidden launcher verb (Linux only).
const LauncherVerb = "__launch"

// RunOptions are the inputs of Run.
type RunOptions struct {
	Policy                *policy.Compiled
	Argv, Env             []string
	Dir                   string
	UID, GID              int
	Groups                []int
	Stdin, Stdout, Stderr *os.File
	Warn                  io.Writer
	Unavailable           map[string]bool
	SelfExe               string
	Cgroup                cgroup.Config
	Registry              Registry
	Layers                []SessionLayer
	Plan                  *planner.Plan
}

// AttachOptions are the inputs of Attach.
type AttachOptions struct {
	PID            int
	Policy         *policy.Compiled
	CallerUID      int
	AllowOtherUser bool
	Warn           io.Writer
	Unavailable    map[string]bool
	Cgroup         cgroup.Config
	Registry       Registry
	Layers         []SessionLayer
	Plan           *planner.Plan
	Audit          *audit.FileSink
}

// LauncherMain is the launcher (Linux only).
func LauncherMain() int { return 125 }

// Run runs a command in a new session.
func Run(ctx context.Context, opts RunOptions) (int, error) { return 0, errNotSupported }

// Attach confines a running process tree.
func Attach(ctx context.Context, opts AttachOptions) (*Entry, error) { return nil, errNotSupported }

// Status is one session as `sessions` shows it.
type Status struct {
	Entry
	Procs []int  `json:"procs"`
	State string `json:"state"`
}

// List joins the registry with the session groups.
func List(cfg cgroup.Config, reg Registry) ([]Status, error) { return nil, errNotSupported }

// Stop kills and removes a session.
func Stop(ctx context.Context, cfg cgroup.Config, reg Registry, id string) error {
	return errNotSupported
}
