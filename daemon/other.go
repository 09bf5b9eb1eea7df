//go:build !linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/daemon/observe"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

var errNotSupported = errors.New("the oxsupervise daemon is not supported on this OS")

// Options configure a Server (Linux only).
type Options struct {
	Socket, AdminGroup, ManagedDir, AuditPath, SelfExe, StateDir, PinDir string
	ApprovalTimeout                                                      time.Duration
	Cgroup                                                               cgroup.Config
	Registry                                                             session.Registry
	Unavailable                                                          map[string]bool
	Log                                                                  io.Writer
	ResolverUpstream                                                     []string
	MaxConns, MaxConnsPerUID, KernelBuffer                               int
	DebugTiming                                                          bool
	Exporters                                                            observe.Start
}

// DefaultPinDir is the pin directory the daemon flags show on every OS
// (on Linux: adopt_linux.go).
const DefaultPinDir = "/sys/fs/bpf/oxsupervise"

// Server is the daemon (Linux only).
type Server struct{}

// New fails: the daemon is Linux only.
func New(Options) (*Server, error) { return nil, errNotSupported }

// Serve fails: the daemon is Linux only.
func (s *Server) Serve(context.Context) error { return errNotSupported }

// Client talks to the daemon (Linux only).
type Client struct{ Socket string }

// Available is false: there is no daemon on this OS.
func Available(string) bool { return false }

func (c *Client) Run(context.Context, RunRequest, [3]*os.File, func(Event)) (Event, error) {
	return Event{}, errNotSupported
}
func (c *Client) Exec(context.Context, ExecRequest, [3]*os.File, func(Event)) (Event, error) {
	return Event{}, errNotSupported
}
func (c *Client) Sessions(context.Context) ([]session.Status, error) { return nil, errNotSupported }
func (c *Client) Stop(context.Context, string) error                 { return errNotSupported }
func (c *Client) Signal(context.Context, string, int) error          { return errNotSupported }
func (c *Client) Attach(context.Context, AttachRequest) (AttachResult, error) {
	return AttachResult{}, errNotSupported
}
func (c *Client) Approvals(context.Context) ([]Approval, error) { return nil, errNotSupported }
func (c *Client) Reply(context.Context, string, string) error   { return errNotSupported }
func (c *Client) Check(context.Context, CheckRequest) (CheckResponse, error) {
	return CheckResponse{}, errNotSupported
}

// RunCLI fails: the daemon is Linux only.
func RunCLI(ctx context.Context, socket string, argv []string, flags *policy.Flags, errOut io.Writer) int {
	fmt.Fprintf(errOut, "oxsupervise run: %v\n", errNotSupported)
	return ExitNoBoundary
}
