package windows

import (
	"errors"
	"fmt"
	"strings"

	"github.com/openoxide/oxsupervise/policy"
)

// Access rights and ACE flags (winnt.h). Defined here because
// golang.org/x/sys/windows does not build on the OSes the planner is
// tested on.
const (
	accessDelete      = 0x00010000
	accessReadControl = 0x00020000
	accessWriteDAC    = 0x00040000
	accessWriteOwner  = 0x00080000
	accessSynchronize = 0x00100000

	fileReadData        = 0x0001
	fileWriteData       = 0x0002 // FILE_ADD_FILE on directories
	fileAppendData      = 0x0004 // FILE_ADD_SUBDIRECTORY on directories
	fileReadEA          = 0x0008
	fileWriteEA         = 0x0010
	fileExecute         = 0x0020
	fileDeleteChild     = 0x0040
	fileReadAttributes  = 0x0080
	fileWriteAttributes = 0x0100

	fileGenericRead    = accessReadControl | fileReadData | fileReadAttributes | fileReadEA | accessSynchronize
	fileGenericWrite   = accessReadControl | fileWriteData | fileWriteAttributes | fileWriteEA | fileAppendData | accessSynchronize
	fileGenericExecute = accessReadControl | fileReadAttributes | fileExecute | accessSynchronize

	objectInheritACE    = 0x1
	containerInheritACE = 0x2
)

// Masks the plan uses.
const (
	// MaskWritableRoot is granted to the session SID on writable roots.
	// It deliberately lacks FILE_DELETE_CHILD: with it, a parent's grant
	// would let the session delete a child whose own ACL denies DELETE,
	// which is how protected entries below a root are kept.
	MaskWritableRoot = fileGenericRead | fileGenericWrite | fileGenericExecute | accessDelete
	// MaskProtected is denied to the session SID on protected entries:
	// every way to change the entry, its contents or its ACL.
	MaskProtected = fileWriteData | fileAppendData | fileWriteEA | fileWriteAttributes | fileDeleteChild |
		accessDelete | accessWriteDAC | accessWriteOwner
	// MaskNoDelete is denied on the ancestors of protected entries inside
	// a writable root, so a protected directory cannot be moved aside and
	// replaced by an unprotected one of the same name.
	MaskNoDelete = accessDelete
)

// ACEKind says whether an ACE allows or denies.
type ACEKind string

const (
	ACEAllow ACEKind = "allow"
	ACEDeny  ACEKind = "deny"
)

// ACE is one access control entry the session adds to a file's DACL.
type ACE struct {
	Path string  `json:"path"`
	SID  string  `json:"sid"`
	Kind ACEKind `json:"kind"`
	Mask uint32  `json:"mask"`
	// Inherit makes the ACE apply to everything created below Path
	// (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE).
	Inherit bool `json:"inherit"`
	// Reason says which part of the policy asked for the ACE.
	Reason string `json:"reason"`
}

// InheritFlags returns the ACE flags for SetEntriesInAcl.
func (a ACE) InheritFlags() uint32 {
	if a.Inherit {
		return objectInheritACE | containerInheritACE
	}
	return 0
}

// Token flags for CreateRestrictedToken (winnt.h).
const (
	TokenDisableMaxPrivilege = 0x1
	TokenLUAToken            = 0x4
	TokenWriteRestricted     = 0x8
)

// TokenPlan describes the restricted token the command runs with.
type TokenPlan struct {
	// Restricted is false when the command keeps the caller's token
	// (external-sandbox, full-access).
	Restricted bool `json:"restricted"`
	// Flags for CreateRestrictedToken.
	Flags uint32 `json:"flags"`
	// DisableSIDs become deny-only in the new token.
	DisableSIDs []string `json:"disable_sids"`
	// RestrictingSIDs: with WRITE_RESTRICTED, a write succeeds only if
	// both the normal SIDs and these grant it. The session SID is granted
	// on writable roots. Everyone is included because the named-pipe
	// filesystem and the null device grant write to Everyone only, and
	// without them shells, node and git cannot create pipes or write to
	// NUL; the price is that objects whose DACL grants Everyone write stay
	// writable (reported as a missing guarantee). The logon SID is NOT
	// included: user processes' default DACLs grant it full access, so it
	// would let the session write into the memory of the user's other
	// processes.
	RestrictingSIDs []string `json:"restricting_sids"`
	// DefaultDACLSIDs get GENERIC_ALL in the token's default DACL so the
	// session's own processes, threads and pipes remain writable to it.
	DefaultDACLSIDs []string `json:"default_dacl_sids"`
}

// Job object limits (winnt.h).
const (
	JobLimitActiveProcess                  = 0x00000008
	JobLimitJobMemory                      = 0x00000200
	JobLimitDieOnUnhandledException        = 0x00000400
	JobLimitKillOnJobClose                 = 0x00002000
	JobUILimitHandles                      = 0x00000001
	JobUILimitReadClipboard                = 0x00000002
	JobUILimitWriteClipboard               = 0x00000004
	JobUILimitSystemParameters             = 0x00000008
	JobUILimitDisplaySettings              = 0x00000010
	JobUILimitGlobalAtoms                  = 0x00000020
	JobUILimitDesktop                      = 0x00000040
	JobUILimitExitWindows                  = 0x00000080
	jobUILimitAll                          = 0xff
	jobLimitBreakawayOK             uint32 = 0x00000800
)

// JobPlan describes the session's Job object. Breakaway is never allowed,
// so every descendant stays in the job and dies when it closes.
type JobPlan struct {
	LimitFlags         uint32 `json:"limit_flags"`
	ActiveProcessLimit uint32 `json:"active_process_limit,omitempty"`
	JobMemoryLimit     uint64 `json:"job_memory_limit,omitempty"`
	UIRestrictions     uint32 `json:"ui_restrictions"`
}

// NetworkMechanism says how a network policy is enforced.
type NetworkMechanism string

const (
	NetworkUnrestricted NetworkMechanism = "unrestricted" // policy "full": nothing to enforce
	NetworkUnenforced   NetworkMechanism = "unenforced"   // accepted with AllowDegraded
)

// Guarantee is one promise of the policy and whether this backend keeps it.
type Guarantee struct {
	Name     string `json:"name"`
	Enforced bool   `json:"enforced"`
	Detail   string `json:"detail"`
}

// Environment is what the planner needs to know about the machine and the
// user's choices.
type Environment struct {
	// Elevated is true when the supervisor runs with an elevated token.
	Elevated bool
	// AllowDegraded accepts running although the policy asks for
	// guarantees this backend cannot give (denied reads, network limits);
	// without it such policies are refused.
	AllowDegraded bool
}

// Plan is everything the Windows runner will do for one session.
type Plan struct {
	SessionID  string           `json:"session_id"`
	SessionSID string           `json:"session_sid"`
	Mode       policy.Mode      `json:"mode"`
	Token      TokenPlan        `json:"token"`
	Job        JobPlan          `json:"job"`
	ACEs       []ACE            `json:"aces"`
	Network    NetworkMechanism `json:"network"`
	Guarantees []Guarantee      `json:"guarantees"`
	// Notes are limits of the backend that are not policy guarantees
	// (observability), printed with the missing guarantees.
	Notes []string `json:"notes,omitempty"`
	// Unsandboxed is true in full-access mode: no token restriction, no
	// ACEs; the job still kills every descendant when the session ends.
	Unsandboxed bool `json:"unsandboxed"`
}

// Missing lists the guarantees the plan does not keep, for the loud
// statement the runner prints and audits before the command starts.
func (p *Plan) Missing() []Guarantee {
	var out []Guarantee
	for _, g := range p.Guarantees {
		if !g.Enforced {
			out = append(out, g)
		}
	}
	return out
}

// ErrUnsupportedPolicy wraps refusals of policies this backend cannot
// honour in the current environment.
var ErrUnsupportedPolicy = errors.New("policy not enforceable by the Windows backend")

// NewPlan decides how to confine a session under c, or refuses with an
// error naming the missing guarantee.
func NewPlan(c *policy.Compiled, sessionID string, env Environment) (*Plan, error) {
	if c == nil {
		return nil, errors.New("plan windows session: nil compiled policy")
	}
	sid, err := SessionSID(sessionID)
	if err != nil {
		return nil, fmt.Errorf("plan windows session: %w", err)
	}
	p := &Plan{SessionID: sessionID, SessionSID: sid, Mode: c.Mode, Job: jobPlan(c)}
	switch c.Mode {
	case policy.ModeFullAccess:
		p.Unsandboxed = true
		p.Network = NetworkUnrestricted
		// No limits and no UI restrictions; the job only ties the
		// descendants' lifetime to the session.
		p.Job = JobPlan{LimitFlags: JobLimitKillOnJobClose}
		p.Guarantees = append(p.Guarantees, Guarantee{Name: "sandbox", Enforced: false,
			Detail: "full-access mode: no filesystem, network or process restriction applies"})
		return p, nil
	case policy.ModeExternalSandbox:
		if c.FilesystemRules {
			return nil, fmt.Errorf("plan windows session: mode %s with filesystem_rules=true is inconsistent", c.Mode)
		}
	case policy.ModeReadOnly, policy.ModeWorkspaceWrite:
		if !c.FilesystemRules {
			return nil, fmt.Errorf("plan windows session: mode %s with filesystem_rules=false is inconsistent", c.Mode)
		}
		if c.Mode == policy.ModeReadOnly && len(c.WritableRoots) > 0 {
			return nil, fmt.Errorf("plan windows session: read-only mode with %d writable roots is inconsistent", len(c.WritableRoots))
		}
		if err := p.planFilesystem(c); err != nil {
			return nil, fmt.Errorf("plan windows session: %w", err)
		}
		if err := p.planDenyRead(c, env); err != nil {
			return nil, fmt.Errorf("plan windows session: %w", err)
		}
	default:
		return nil, fmt.Errorf("plan windows session: unknown mode %q", c.Mode)
	}
	if err := p.planNetwork(c, env); err != nil {
		return nil, fmt.Errorf("plan windows session: %w", err)
	}
	p.Guarantees = append(p.Guarantees, Guarantee{Name: "process-lifetime", Enforced: true,
		Detail: "every process of the session is in a Job object without breakaway, killed when the session ends"})
	p.Notes = append(p.Notes, "ACL and token denials are not observable from outside the process (plain ERROR_ACCESS_DENIED results): there are no per-denial audit records, only the backend's own decisions")
	return p, nil
}

func jobPlan(c *policy.Compiled) JobPlan {
	j := JobPlan{
		LimitFlags:     JobLimitKillOnJobClose | JobLimitDieOnUnhandledException,
		UIRestrictions: jobUILimitAll,
	}
	if c.Limits.PidsMax > 0 {
		j.LimitFlags |= JobLimitActiveProcess
		j.ActiveProcessLimit = uint32(min(c.Limits.PidsMax, int64(^uint32(0))))
	}
	if c.Limits.MemoryMax > 0 {
		j.LimitFlags |= JobLimitJobMemory
		j.JobMemoryLimit = uint64(c.Limits.MemoryMax)
	}
	return j
}

// planFilesystem plans the token and the ACEs of read-only and
// workspace-write sessions.
func (p *Plan) planFilesystem(c *policy.Compiled) error {
	p.Token = TokenPlan{
		Restricted:      true,
		Flags:           TokenDisableMaxPrivilege | TokenLUAToken | TokenWriteRestricted,
		DisableSIDs:     []string{SIDAdministrators},
		RestrictingSIDs: []string{p.SessionSID, SIDEveryone},
		DefaultDACLSIDs: []string{p.SessionSID},
	}
	var roots []string
	seen := map[string]bool{}
	add := func(a ACE) {
		key := string(a.Kind) + "\x00" + strings.ToLower(a.Path)
		if seen[key] {
			return
		}
		seen[key] = true
		p.ACEs = append(p.ACEs, a)
	}
	for _, r := range c.WritableRoots {
		path, err := cleanWinPath("writable root", r.Path)
		if err != nil {
			return err
		}
		if isVolumeRoot(path) {
			return fmt.Errorf("%w: writable root %q is a volume root; granting it would rewrite the ACL of the whole volume", ErrUnsupportedPolicy, path)
		}
		roots = append(roots, path)
		add(ACE{Path: path, SID: p.SessionSID, Kind: ACEAllow, Mask: MaskWritableRoot, Inherit: true,
			Reason: "writable root (" + r.Source + ")"})
	}
	var protectedOutside int
	for _, a := range c.ProtectedPaths {
		path, err := cleanWinPath("protected path", a.Path)
		if err != nil {
			return err
		}
		root := containingRoot(path, roots)
		if root == "" {
			// Outside every writable root the session SID has no write
			// grant, so the entry is already read-only to the session.
			protectedOutside++
			continue
		}
		add(ACE{Path: path, SID: p.SessionSID, Kind: ACEDeny, Mask: MaskProtected, Inherit: a.Dir,
			Reason: "protected entry (" + a.Source + ")"})
		for _, anc := range winAncestors(path) {
			if !strings.EqualFold(anc, root) && containingRoot(anc, []string{root}) != "" {
				add(ACE{Path: anc, SID: p.SessionSID, Kind: ACEDeny, Mask: MaskNoDelete,
					Reason: "ancestor of protected entry " + path})
			}
		}
	}
	writes := "writes succeed only below the writable roots (write-restricted token + session SID ACEs)"
	if c.Mode == policy.ModeReadOnly {
		writes = "no file writes (write-restricted token, no grants for the session SID)"
	}
	p.Guarantees = append(p.Guarantees,
		Guarantee{Name: "filesystem-writes", Enforced: true, Detail: writes + "; objects whose DACL grants Everyone write remain writable"},
		Guarantee{Name: "protected-existing", Enforced: true,
			Detail: fmt.Sprintf("%d protected entries that exist now get deny-write ACEs (%d outside writable roots are read-only already)", countKind(p.ACEs, ACEDeny, MaskProtected), protectedOutside)},
	)
	if len(c.ProtectedPatterns) > 0 && c.Mode == policy.ModeWorkspaceWrite {
		p.Guarantees = append(p.Guarantees, Guarantee{Name: "protected-future-entries", Enforced: false,
			Detail: "Windows ACLs attach to existing files, not to names: a protected name created during the session (a first .claude/, a new .git/hooks) inherits the writable root's grant and is NOT protected"})
	}
	return nil
}

func countKind(aces []ACE, kind ACEKind, mask uint32) int {
	n := 0
	for _, a := range aces {
		if a.Kind == kind && a.Mask == mask {
			n++
		}
	}
	return n
}

// planDenyRead decides about denied reads: a write-restricted token
// consults its restricting SIDs for writes only, so no ACE for the session
// SID can stop a read, and a deny ACE for the user would break the user's
// own programs outside the session.
func (p *Plan) planDenyRead(c *policy.Compiled, env Environment) error {
	n := len(c.DenyRead) + len(c.DenyReadGlobs)
	if n == 0 {
		return nil
	}
	detail := fmt.Sprintf("%d denied-read entries (credentials such as ~/.ssh) stay READABLE: a write-restricted token cannot restrict reads", n)
	if !env.AllowDegraded {
		return fmt.Errorf("%w: %s; pass the explicit degraded-mode flag to run anyway", ErrUnsupportedPolicy, detail)
	}
	p.Guarantees = append(p.Guarantees, Guarantee{Name: "deny-read", Enforced: false, Detail: detail})
	return nil
}

// planNetwork decides about egress. Limiting it needs WFP filters scoped to
// the session, which need elevation and are not implemented in this
// backend; so every policy but "full" is refused unless degraded mode was
// asked for.
func (p *Plan) planNetwork(c *policy.Compiled, env Environment) error {
	switch c.Network.Policy {
	case policy.NetFull:
		p.Network = NetworkUnrestricted
		return nil
	case policy.NetNone, policy.NetAllowlist:
	default:
		return fmt.Errorf("unknown network policy %q", c.Network.Policy)
	}
	why := "WFP filters are not implemented in this backend"
	if !env.Elevated {
		why = "WFP filters need an elevated supervisor (and are not implemented in this backend)"
	}
	detail := fmt.Sprintf("network policy %q is NOT enforced: the session has full network access (%s)", c.Network.Policy, why)
	if !env.AllowDegraded {
		return fmt.Errorf("%w: %s; pass the explicit degraded-mode flag to run anyway", ErrUnsupportedPolicy, detail)
	}
	p.Network = NetworkUnenforced
	p.Guarantees = append(p.Guarantees, Guarantee{Name: "network", Enforced: false, Detail: detail})
	return nil
}

// CheckStateDir refuses a journal directory the session could write to: a
// session that edits its own undo journal could leave its grants behind.
func (p *Plan) CheckStateDir(dir string) error {
	clean, err := cleanWinPath("journal directory", dir)
	if err != nil {
		return err
	}
	for _, a := range p.ACEs {
		if a.Kind == ACEAllow && containingRoot(clean, []string{a.Path}) != "" {
			return fmt.Errorf("journal directory %s is inside writable root %s, where the session could rewrite it", clean, a.Path)
		}
	}
	return nil
}
