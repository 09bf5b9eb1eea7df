package daemon

import (
	"errors"
	"path/filepath"

	"github.com/openoxide/oxsupervise/policy"
)

// RequestFlags converts parsed CLI policy flags into the daemon's request
// form, with relative paths made absolute against the client's directory.
// --audit-log is refused: the daemon decides where audit records go.
func RequestFlags(f *policy.Flags, cwd string) (PolicyFlags, error) {
	if f == nil {
		return PolicyFlags{}, nil
	}
	if f.AuditLog != "" {
		return PolicyFlags{}, errors.New("--audit-log cannot be chosen through the daemon (it writes to its own audit log); run standalone with sudo to use it")
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) || p[0] == '~' {
			return p
		}
		return filepath.Join(cwd, p)
	}
	out := PolicyFlags{
		Sandbox: f.Sandbox, FullAuto: f.FullAuto, Yolo: f.Yolo, Workspace: abs(f.Workspace),
		Net: f.Net, AllowNet: f.AllowNet, ConfigFile: abs(f.ConfigFile), Agent: f.Agent,
	}
	for _, r := range f.WritableRoots {
		out.WritableRoots = append(out.WritableRoots, abs(r))
	}
	return out, nil
}
