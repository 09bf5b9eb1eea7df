package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/phasetime"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// resolverUpstreamEnv sets the DNS upstreams (host:port, comma-separated)
// of the network layer's resolvers (Options.ResolverUpstream).
const resolverUpstreamEnv = "OXSUPERVISE_RESOLVER_UPSTREAM"

// ParseCommandLine parses the daemon's command line, `oxsupervise daemon
// [flags]` (args are the words after "daemon"), and the environment the
// daemon reads, into the Options of its Server. It is the one definition
// of that command line: the daemon program (cmd/oxsupervised) starts from
// it, and the CLI's daemon verb parses with it first, so that --help (the
// source of the man page and completions) and a bad flag are answered
// without the daemon program, which is then executed with the same args.
//
// done reports that the caller must exit with code: after printing the
// usage to out for --help (0), or an error naming the flag to errOut
// (ExitUsage).
func ParseCommandLine(args []string, out, errOut io.Writer) (opts Options, code int, done bool) {
	fs := pflag.NewFlagSet("daemon", pflag.ContinueOnError)
	socket := fs.String("socket", EnvSocket(), "API socket path")
	adminGroup := fs.String("admin-group", "", "group (name or gid) whose members see and stop every session and answer every approval (default: root only)")
	timeout := fs.Duration("approval-timeout", 5*time.Minute, "how long a request waits for an approval before it is refused")
	auditLog := fs.String("audit-log", "", "audit log of the daemon and its sessions (default /var/log/oxsupervise/audit.jsonl)")
	cgroupParent := fs.String("cgroup-parent", "", "cgroup (relative to the cgroup2 mount) holding session groups (default oxsupervise; other CLI verbs only see the default)")
	runDir := fs.String("run-dir", "", "directory of the session registry (RUN-DIR/sessions) and daemon state (RUN-DIR/daemon) (default /run/oxsupervise)")
	pinDir := fs.String("pin-dir", "", "bpffs directory where the BPF links and maps are pinned so that sessions stay confined when the daemon dies (default "+DefaultPinDir+")")
	maxConns := fs.Int("max-conns", DefaultMaxConns, "connections open at once from users other than root")
	maxConnsPerUser := fs.Int("max-conns-per-user", DefaultMaxConnsPerUID, "connections open at once from one user other than root")
	kernelBuffer := fs.String("kernel-buffer", "4M", "size of the ring buffer the BPF programs report refusals in: a power of two from 64K to 1G")
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise daemon [--socket PATH] [--admin-group GROUP] [--approval-timeout D] [--audit-log PATH] [--cgroup-parent P] [--run-dir DIR] [--pin-dir DIR] [--max-conns N] [--max-conns-per-user N] [--kernel-buffer SIZE]")
		fs.PrintDefaults()
	}
	usage := func(format string, a ...any) (Options, int, bool) {
		fmt.Fprintf(errOut, "oxsupervise daemon: "+format+"\n", a...)
		return Options{}, ExitUsage, true
	}
	switch err := fs.Parse(args); {
	case errors.Is(err, pflag.ErrHelp):
		return Options{}, 0, true
	case err != nil:
		return usage("%v (see oxsupervise daemon --help)", err)
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	if *maxConns < 1 || *maxConnsPerUser < 1 {
		return usage("--max-conns (%d) and --max-conns-per-user (%d) must be at least 1", *maxConns, *maxConnsPerUser)
	}
	ringSize, err := policy.ParseKernelBuffer(*kernelBuffer)
	if err != nil {
		return usage("--kernel-buffer: %v", err)
	}
	var upstream []string
	if v := os.Getenv(resolverUpstreamEnv); v != "" {
		for _, hp := range strings.Split(v, ",") {
			hp = strings.TrimSpace(hp)
			if _, _, err := net.SplitHostPort(hp); err != nil {
				return usage("%s: %q is not host:port: %v", resolverUpstreamEnv, hp, err)
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
	return Options{
		Cgroup: cgroup.Config{Parent: *cgroupParent}, Registry: reg, StateDir: stateDir,
		Socket: *socket, AdminGroup: *adminGroup, ApprovalTimeout: *timeout, AuditPath: *auditLog,
		ManagedDir:       os.Getenv(policy.ManagedDirEnv),
		Unavailable:      session.ParseUnavailable(os.Getenv(session.ForceUnavailableEnv)),
		ResolverUpstream: upstream,
		PinDir:           *pinDir,
		MaxConns:         *maxConns,
		MaxConnsPerUID:   *maxConnsPerUser,
		KernelBuffer:     int(ringSize),
		DebugTiming:      os.Getenv(phasetime.Env) != "",
	}, 0, false
}

// Main runs the daemon with opts until ctx is done and returns the exit
// status: 0, ExitFail when it cannot start or stops on an error (it must
// run as root), ExitUsage for options New refuses. Log lines go to errOut.
func Main(ctx context.Context, opts Options, errOut io.Writer) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(errOut, "oxsupervise daemon: must run as root (it creates cgroups and runs sessions as their users)")
		return ExitFail
	}
	opts.Log = errOut
	srv, err := New(opts)
	if err != nil {
		fmt.Fprintf(errOut, "oxsupervise daemon: %v\n", err)
		return ExitUsage
	}
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintf(errOut, "oxsupervise daemon: %v\n", err)
		return ExitFail
	}
	return 0
}
