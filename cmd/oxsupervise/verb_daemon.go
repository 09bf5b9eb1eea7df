package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/daemon"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// socketEnv overrides the daemon socket for every client verb (tests, and
// sessions whose daemon listens elsewhere).
const socketEnv = "OXSUPERVISE_SOCKET"

func defaultSocket() string {
	if s := os.Getenv(socketEnv); s != "" {
		return s
	}
	return daemon.DefaultSocket
}

func cmdDaemon(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("daemon", pflag.ContinueOnError)
	socket := fs.String("socket", defaultSocket(), "API socket path")
	adminGroup := fs.String("admin-group", "", "group (name or gid) whose members see and stop every session and answer every approval (default: root only)")
	timeout := fs.Duration("approval-timeout", 5*time.Minute, "how long a request waits for an approval before it is refused")
	auditLog := fs.String("audit-log", "", "audit log of the daemon and its sessions (default /var/log/oxsupervise/audit.jsonl)")
	cgroupParent := fs.String("cgroup-parent", "", "cgroup (relative to the cgroup2 mount) holding session groups (default oxsupervise; other CLI verbs only see the default)")
	runDir := fs.String("run-dir", "", "directory of the session registry (RUN-DIR/sessions) and daemon state (RUN-DIR/daemon) (default /run/oxsupervise)")
	pinDir := fs.String("pin-dir", "", "bpffs directory where the BPF links and maps are pinned so that sessions stay confined when the daemon dies (default "+daemon.DefaultPinDir+")")
	maxConns := fs.Int("max-conns", daemon.DefaultMaxConns, "connections open at once from users other than root")
	maxConnsPerUser := fs.Int("max-conns-per-user", daemon.DefaultMaxConnsPerUID, "connections open at once from one user other than root")
	kernelBuffer := fs.String("kernel-buffer", "4M", "size of the ring buffer the BPF programs report refusals in: a power of two from 64K to 1G")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise daemon [--socket PATH] [--admin-group GROUP] [--approval-timeout D] [--audit-log PATH] [--cgroup-parent P] [--run-dir DIR] [--pin-dir DIR] [--max-conns N] [--max-conns-per-user N] [--kernel-buffer SIZE]")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "daemon", args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(s.err, "oxsupervise daemon: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *maxConns < 1 || *maxConnsPerUser < 1 {
		fmt.Fprintf(s.err, "oxsupervise daemon: --max-conns (%d) and --max-conns-per-user (%d) must be at least 1\n", *maxConns, *maxConnsPerUser)
		return exitUsage
	}
	ringSize, err := policy.ParseKernelBuffer(*kernelBuffer)
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise daemon: --kernel-buffer: %v\n", err)
		return exitUsage
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(s.err, "oxsupervise daemon: must run as root (it creates cgroups and runs sessions as their users)")
		return exitFail
	}
	var upstream []string
	if v := os.Getenv("OXSUPERVISE_RESOLVER_UPSTREAM"); v != "" {
		for _, hp := range strings.Split(v, ",") {
			hp = strings.TrimSpace(hp)
			if _, _, err := net.SplitHostPort(hp); err != nil {
				fmt.Fprintf(s.err, "oxsupervise daemon: OXSUPERVISE_RESOLVER_UPSTREAM: %q is not host:port: %v\n", hp, err)
				return exitUsage
			}
			upstream = append(upstream, hp)
		}
	}
	var reg session.Registry
	stateDir := ""
	if *runDir != "" {
		reg.Dir = filepath.Join(*runDir, "sessions")
		stateDir = filepath.Join(*runDir, "daemon")
	}
	srv, err := daemon.New(daemon.Options{
		Cgroup: cgroup.Config{Parent: *cgroupParent}, Registry: reg, StateDir: stateDir,
		Socket: *socket, AdminGroup: *adminGroup, ApprovalTimeout: *timeout, AuditPath: *auditLog,
		ManagedDir:       os.Getenv(policy.ManagedDirEnv),
		Unavailable:      session.ParseUnavailable(os.Getenv(session.ForceUnavailableEnv)),
		Log:              s.err,
		ResolverUpstream: upstream,
		PinDir:           *pinDir,
		MaxConns:         *maxConns,
		MaxConnsPerUID:   *maxConnsPerUser,
		KernelBuffer:     int(ringSize),
		DebugTiming:      os.Getenv(phasetime.Env) != "",
	})
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise daemon: %v\n", err)
		return exitUsage
	}
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintf(s.err, "oxsupervise daemon: %v\n", err)
		return exitFail
	}
	return exitOK
}
