package policy

import (
	"github.com/spf13/pflag"
)

// Flags are the policy flags shared by run, attach and policy show/check
// (DESIGN §7). They form the last, highest-precedence layer; a flag counts
// only when it was given on the command line, so defaults never override
// a configuration file.
type Flags struct {
	Sandbox       string
	FullAuto      bool
	Yolo          bool
	Workspace     string
	WritableRoots []string
	Net           string
	AllowNet      []string
	ConfigFile    string
	AuditLog      string
	// Agent names the agent profile (package agent), "none" for none;
	// empty: detected from the command.
	Agent string

	// fs is the flag set the flags were registered on; nil when Flags was
	// built by hand, in which case every non-zero field counts as set.
	fs *pflag.FlagSet
	// agentFlag is set by RegisterAgentFlag: policy check has a flag of
	// the same name that means something else.
	agentFlag bool
}

// Flag names, shared with the CLI help and with Effective sources.
const (
	FlagSandbox      = "sandbox"
	FlagFullAuto     = "full-auto"
	FlagYolo         = "yolo"
	FlagWorkspace    = "workspace"
	FlagWritableRoot = "writable-root"
	FlagNet          = "net"
	FlagAllowNet     = "allow-net"
	FlagConfig       = "config"
	FlagAuditLog     = "audit-log"
	FlagAgent        = "agent"
)

// RegisterFlags adds the policy flags to fs and returns the struct they
// fill in when fs is parsed.
func RegisterFlags(fs *pflag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVarP(&f.Sandbox, FlagSandbox, "s", "", "sandbox mode: read-only | workspace-write | external-sandbox | full-access")
	fs.BoolVar(&f.FullAuto, FlagFullAuto, false, "preset: workspace-write, approvals on request")
	fs.BoolVar(&f.Yolo, FlagYolo, false, "preset: full-access, no approvals (no sandbox at all; dangerous)")
	fs.StringVar(&f.Workspace, FlagWorkspace, "", "workspace directory (default: current directory)")
	fs.StringArrayVar(&f.WritableRoots, FlagWritableRoot, nil, "additional writable directory (repeatable)")
	fs.StringVar(&f.Net, FlagNet, "", "network policy: none | allowlist | full")
	fs.StringArrayVar(&f.AllowNet, FlagAllowNet, nil, "allow a destination: HOST[:PORT] or IP[/BITS][:PORT] (repeatable; implies --net allowlist)")
	fs.StringVar(&f.ConfigFile, FlagConfig, "", "extra policy file, applied after the workspace config and before flags")
	fs.StringVar(&f.AuditLog, FlagAuditLog, "", "audit log path (default /var/log/oxsupervise/audit.jsonl)")
	return f
}

// RegisterAgentFlag adds --agent to fs (run and policy show; policy check
// has its own --agent, naming the agent whose permission rules apply).
func RegisterAgentFlag(fs *pflag.FlagSet, f *Flags) {
	fs.StringVar(&f.Agent, FlagAgent, "", "agent profile: claude-code | codex | opencode | aider | none (default: detected from the command)")
	f.agentFlag = true
}

// changed reports whether the flag called name was given.
func (f *Flags) changed(name string) bool {
	if f == nil {
		return false
	}
	if name == FlagAgent {
		// By value: `policy check` has an --agent of its own (whose
		// permission rules apply) on the same flag set, which does not
		// name a profile.
		return f.Agent != ""
	}
	if f.fs != nil {
		if name == FlagAgent && !f.agentFlag {
			return false
		}
		return f.fs.Changed(name)
	}
	switch name {
	case FlagSandbox:
		return f.Sandbox != ""
	case FlagFullAuto:
		return f.FullAuto
	case FlagYolo:
		return f.Yolo
	case FlagWorkspace:
		return f.Workspace != ""
	case FlagWritableRoot:
		return len(f.WritableRoots) > 0
	case FlagNet:
		return f.Net != ""
	case FlagAllowNet:
		return len(f.AllowNet) > 0
	case FlagConfig:
		return f.ConfigFile != ""
	case FlagAuditLog:
		return f.AuditLog != ""
	case FlagAgent:
		return f.Agent != ""
	}
	return false
}
