//go:build linux

package daemon

import (
	"fmt"
	"io"
	"net/http"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

func toPolicyFlags(f PolicyFlags) *policy.Flags {
	return &policy.Flags{
		Sandbox: f.Sandbox, FullAuto: f.FullAuto, Yolo: f.Yolo, Workspace: f.Workspace,
		WritableRoots: f.WritableRoots, Net: f.Net, AllowNet: f.AllowNet, ConfigFile: f.ConfigFile,
		Agent: f.Agent,
	}
}

// loadPolicy compiles the policy of a session of cred: policy.Load runs
// with the user's file access (asUser), the managed directory is the
// daemon's, and the audit path is the daemon's unless the user is root.
// The directories the session will use must be accessible to the user.
// argv is the session's command (its agent profile is detected from it;
// nil for attach), whose missing agent state is created as the user.
func (s *Server) loadPolicy(cred credential, home string, flags PolicyFlags, dir string, env []string, argv []string, warn io.Writer) (*policy.Compiled, error) {
	var c *policy.Compiled
	// Made by the daemon (root) before it takes the user's identity.
	cache, err := policy.ScanCacheDir(int(cred.UID))
	if err != nil {
		fmt.Fprintf(warn, "oxsupervise: warning: %v; scanning without it\n", err)
	}
	err = asUser(cred, func() error {
		for _, d := range []string{dir, flags.Workspace} {
			if d == "" {
				continue
			}
			fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return errorf(http.StatusForbidden, "forbidden", "directory %s: not accessible to uid %d: %v", d, cred.UID, err)
			}
			unix.Close(fd)
		}
		var err error
		c, _, err = policy.Load(policy.LoadOptions{
			ManagedDir: s.opts.ManagedDir,
			Home:       home,
			Workspace:  dir,
			Flags:      toPolicyFlags(flags),
			Env:        envLookup(env),
			Warn:       warn,
			ScanCache:  cache,
			ParseCache: s.parsed,
			Argv:       argv,
			AgentState: agentOwner(argv, cred),
		})
		if err != nil {
			return errorf(http.StatusBadRequest, "policy", "policy: %v", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cred.UID != 0 && c.Audit.Path != s.opts.AuditPath {
		if c.Audit.Path != "" && c.Audit.Path != audit.DefaultPath {
			fmt.Fprintf(warn, "oxsupervise: warning: audit path %s ignored: the daemon writes audit records to %s\n", c.Audit.Path, s.opts.AuditPath)
		}
		c.Audit.Path = s.opts.AuditPath
	}
	return c, nil
}

// agentOwner creates a run session's missing agent state for its user.
func agentOwner(argv []string, cred credential) *policy.AgentOwner {
	if argv == nil {
		return nil
	}
	return &policy.AgentOwner{UID: cred.UID, GID: cred.GID}
}

func envLookup(env []string) func(string) string {
	return func(name string) string { return session.EnvValue(env, name) }
}
