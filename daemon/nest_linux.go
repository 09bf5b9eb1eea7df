//go:build linux

package daemon

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/openoxide/oxsupervise/host"
	"github.com/openoxide/oxsupervise/policy"
)

// Nested sessions of the daemon's sessions (docs/agents-tiers.md): every
// run session the daemon creates is served by host.RunNesting, as a
// standalone run's is, with its socket beside the API socket (so a user
// who reaches the API reaches it); the caller is authorized by its cgroup
// there, and this file only says how a request is compiled: with the
// same layers and managed policy as the session's own (loadPolicy, as the
// session's user), then its tier.

// nestDir holds the daemon sessions' nested-session sockets.
func (s *Server) nestDir() string { return filepath.Join(filepath.Dir(s.opts.Socket), "nest") }

// nestRequest compiles a nested run's request in a session of cred.
func (s *Server) nestRequest(cred credential, home string) func(parent *policy.Compiled, req host.NestRequest) (*policy.Compiled, []string, error) {
	return func(parent *policy.Compiled, req host.NestRequest) (*policy.Compiled, []string, error) {
		var warnings []string
		request := parent
		if len(req.PolicyArgs) > 0 {
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			pf := policy.RegisterFlags(fs)
			if err := fs.Parse(req.PolicyArgs); err != nil {
				return nil, nil, err
			}
			flags, err := RequestFlags(pf, req.Dir)
			if err != nil {
				return nil, nil, err
			}
			var buf bytes.Buffer
			c, err := s.loadPolicy(cred, home, flags, req.Dir, req.Env, req.Argv, &buf)
			for _, l := range strings.Split(buf.String(), "\n") {
				if l = strings.TrimSpace(strings.TrimPrefix(l, "oxsupervise: warning:")); l != "" {
					warnings = append(warnings, l)
				}
			}
			if err != nil {
				return nil, warnings, err
			}
			request = c
		}
		out, w, err := policy.TierRequest(parent, request, req.Tier, req.Agent)
		return out, append(warnings, w...), err
	}
}
