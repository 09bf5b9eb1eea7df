package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/internal/account"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// target is the user a session's command runs as.
type target struct {
	uid, gid int
	groups   []int
	name     string // only when switched
	home     string
	// switched is true when the command runs as someone else than the
	// supervisor (sudo, --user).
	switched bool
}

// resolveTarget picks --user, else the sudo caller (SUDO_UID), else the
// current user.
func resolveTarget(flagUser string) (*target, error) {
	spec := flagUser
	if spec == "" {
		spec = os.Getenv("SUDO_UID")
	}
	if spec == "" {
		t := &target{uid: os.Getuid(), gid: os.Getgid()}
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("home directory: %w", err)
		}
		t.home = home
		// No user database lookup: the name is only for a command that
		// runs as someone else (targetEnv), and the lookup (NSS) is a
		// cost every run would pay.
		gids, _ := os.Getgroups()
		t.groups = gids
		return t, nil
	}
	// Through internal/account: this program is static (no cgo), and
	// the account package asks NSS itself for what /etc/passwd lacks.
	u, err := account.Lookup(spec)
	if err != nil {
		return nil, err
	}
	t := &target{uid: u.UID, gid: u.GID, name: u.Name, home: u.Home, groups: u.Groups, switched: true}
	if flagUser == "" {
		if g := os.Getenv("SUDO_GID"); g != "" {
			if n, err := strconv.Atoi(g); err == nil {
				t.gid = n
			}
		}
	}
	return t, nil
}

// targetEnv is the caller's environment for a command of t
// (session.UserEnv): with t's identity variables when the command runs as
// someone else.
func targetEnv(t *target) []string {
	var u *session.EnvUser
	if t.switched {
		u = &session.EnvUser{Home: t.home, Name: t.name}
	}
	return session.UserEnv(os.Environ(), u)
}

// loadPolicy compiles the policy for a session of t running argv (nil for
// attach): its agent profile is detected from argv, and the profile's
// missing state entries are created for t.
func loadPolicy(s streams, f *policy.Flags, t *target, argv []string) (*policy.Compiled, error) {
	r, err := resolvePolicy(s, f, t, argv)
	if err != nil {
		return nil, err
	}
	return r.Bind()
}

// resolvePolicy is loadPolicy's resolve step (policy.Resolve), for a
// caller that binds the result itself.
func resolvePolicy(s streams, f *policy.Flags, t *target, argv []string) (*policy.Resolved, error) {
	ws := f.Workspace
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("current directory: %w", err)
		}
		ws = wd
	}
	// The supervisor scans as root; a cache it cannot use only costs the
	// start a full scan.
	cache, err := policy.ScanCacheDir(os.Geteuid())
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise: warning: %v; scanning without it\n", err)
	}
	var owner *policy.AgentOwner
	if argv != nil {
		owner = &policy.AgentOwner{UID: t.uid, GID: t.gid}
	}
	r, _, err := policy.Resolve(policy.LoadOptions{
		Home:       t.home,
		Workspace:  ws,
		Flags:      f,
		Warn:       s.err,
		ScanCache:  cache,
		Argv:       argv,
		AgentState: owner,
	})
	return r, err
}

func cmdRun(ctx context.Context, s streams, args []string) int {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(s.err)
	fs.SetInterspersed(false)
	pf := policy.RegisterFlags(fs)
	policy.RegisterAgentFlag(fs, pf)
	userFlag := fs.String("user", "", "run the command as this user (name or uid; default: the sudo caller)")
	tier := fs.String("tier", "", "inside a session: run the command in a nested session with this tier of the agent's profile (command: no provider credentials or hosts, no writes to the agent's state)")
	allowDegraded := fs.Bool("allow-degraded", false, "Windows: run even though denied reads and network limits cannot be enforced there (each missing guarantee is printed and audited)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: oxsupervise run [policy flags] [--user USER] -- CMD [ARG...]")
		fs.PrintDefaults()
	}
	if code, done := parseVerbFlags(fs, s, "run", args); done {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(s.err, "oxsupervise run: no command given (usage: oxsupervise run [flags] -- CMD [ARG...])")
		return exitUsage
	}
	return runCommand(ctx, s, runRequest{flags: pf, user: *userFlag, allowDegraded: *allowDegraded, argv: argv,
		tier: *tier, policyArgs: policyArgs(fs)})
}

// prepareRun resolves the target user (user, "" meaning the sudo caller or
// the current user), compiles the policy and reads the working directory,
// the steps every OS's runCommand starts with. A nil policy means the
// caller must return code; the reason has been printed.
func prepareRun(s streams, r runRequest, user string) (t *target, c *policy.Compiled, wd string, code int) {
	t, res, wd, code := prepareResolved(s, r, user)
	if res == nil {
		return nil, nil, "", code
	}
	if c, code = bindPolicy(s, res); c == nil {
		return nil, nil, "", code
	}
	return t, c, wd, exitOK
}

// prepareResolved is prepareRun up to the policy's resolve step; the
// caller binds it (bindPolicy), possibly while it does other work.
func prepareResolved(s streams, r runRequest, user string) (t *target, res *policy.Resolved, wd string, code int) {
	t, err := resolveTarget(user)
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: %v\n", err)
		return nil, nil, "", exitUsage
	}
	res, err = resolvePolicy(s, r.flags, t, r.argv)
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: policy: %v\n", err)
		return nil, nil, "", exitUsage
	}
	wd, err = os.Getwd()
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: current directory: %v\n", err)
		return nil, nil, "", exitFail
	}
	return t, res, wd, exitOK
}

// bindPolicy binds res; a nil policy means the caller must return code
// (the reason has been printed).
func bindPolicy(s streams, res *policy.Resolved) (*policy.Compiled, int) {
	c, err := res.Bind()
	if err != nil {
		fmt.Fprintf(s.err, "oxsupervise run: policy: %v\n", err)
		return nil, exitUsage
	}
	return c, exitOK
}

// runRequest is what cmdRun parsed; runCommand (one per OS) builds the
// boundary with the OS's backend and runs the command in it.
type runRequest struct {
	flags         *policy.Flags
	user          string
	allowDegraded bool
	argv          []string
	// tier is --tier (a nested session's), policyArgs the policy flags
	// as given, for the supervisor of a nested session to compile.
	tier       string
	policyArgs []string
}

// policyArgs are the policy flags set on fs, as arguments again (the
// nested run sends them to its supervisor, which compiles them): every
// flag but run's own and --agent, which a nested run names its tier by.
func policyArgs(fs *pflag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "user", "allow-degraded", "tier", policy.FlagAgent:
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	return out
}

// parseVerbFlags parses args; done is true when the verb must return code
// (--help printed to stdout, or a usage error explained on stderr).
func parseVerbFlags(fs *pflag.FlagSet, s streams, verb string, args []string) (code int, done bool) {
	// pflag prints the usage itself for --help, to the flag set's output.
	fs.SetOutput(s.out)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, pflag.ErrHelp):
		return exitOK, true
	default:
		fmt.Fprintf(s.err, "oxsupervise %s: %v (see oxsupervise %s --help)\n", verb, err, verb)
		return exitUsage, true
	}
}
