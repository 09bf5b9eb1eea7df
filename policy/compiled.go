package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/netip"
)

// CompiledSchemaVersion changes whenever the meaning or shape of Compiled
// changes, so that a daemon and a client built from different commits refuse
// each other's policies instead of misreading them.
const CompiledSchemaVersion = 2

// Mode is a sandbox mode (DESIGN §2).
type Mode string

const (
	ModeReadOnly        Mode = "read-only"
	ModeWorkspaceWrite  Mode = "workspace-write"
	ModeExternalSandbox Mode = "external-sandbox"
	ModeFullAccess      Mode = "full-access"
)

// Approval says when the agent must ask before acting (the presets'
// second half: --full-auto = on-request, --yolo = never).
type Approval string

const (
	ApprovalUntrusted Approval = "untrusted"
	ApprovalOnRequest Approval = "on-request"
	ApprovalOnFailure Approval = "on-failure"
	ApprovalNever     Approval = "never"
)

// ReadAccess selects whether reads are allowed everywhere except denied
// anchors (full) or only below readable roots (restricted).
type ReadAccess string

const (
	ReadAccessFull       ReadAccess = "full"
	ReadAccessRestricted ReadAccess = "restricted"
)

// Compiled is the backend-neutral, plain-data result of loading, merging,
// clamping and compiling every policy layer. Every backend (BPF-LSM,
// Landlock, cgroup network, Seatbelt, Windows) consumes exactly this; it is
// deterministic for the same inputs and filesystem state, and serialisable
// so the daemon can pass it over its API.
type Compiled struct {
	SchemaVersion int      `json:"schema_version"`
	Mode          Mode     `json:"mode"`
	Approval      Approval `json:"approval"`
	// AllowedModes is the managed allow-list the mode was checked against;
	// kept so a daemon can re-check a client's request.
	AllowedModes []Mode `json:"allowed_modes"`

	// Workspace is the session's workspace root (also present in
	// WritableRoots unless the mode is read-only).
	Workspace Anchor `json:"workspace"`
	// WritableRoots are absolute, symlink-resolved directories below which
	// writes are allowed (subject to Protected*). Empty in read-only mode;
	// meaningless in full-access and external-sandbox (FilesystemRules false).
	WritableRoots []Anchor `json:"writable_roots"`
	// FilesystemRules is false for full-access and external-sandbox: no
	// filesystem layer is built at all.
	FilesystemRules bool `json:"filesystem_rules"`

	ReadAccess ReadAccess `json:"read_access"`
	// ReadableRoots apply when ReadAccess is restricted: listed roots plus
	// the platform defaults (/usr, /lib, /etc, ... on Linux).
	ReadableRoots []Anchor `json:"readable_roots,omitempty"`

	// ProtectedPatterns name entries that stay read-only inside writable
	// roots, matched by path components so that entries which do not exist
	// yet are covered (a later `git init`, a first `.claude/`).
	ProtectedPatterns []ProtectedPattern `json:"protected_patterns"`
	// ProtectedPaths are the existing entries those patterns (and explicit
	// protected paths, and the targets of `.git` files' gitdir: lines)
	// resolved to when the policy was bound; backends that can only
	// protect existing inodes (Landlock + bind mounts, Windows ACEs) use them.
	ProtectedPaths []Anchor `json:"protected_paths"`
	// ProtectedPathsComplete is false when the bind-time scan for
	// ProtectedPaths stopped at its entry bound (a warning said so); the
	// patterns still cover everything, existing-inode backends do not.
	ProtectedPathsComplete bool `json:"protected_paths_complete"`

	// DenyRead are credential locations that must not be read (nor
	// written). Entries that do not exist at bind time are kept with
	// Exists=false so that path-based backends can still name them.
	DenyRead []Anchor `json:"deny_read"`
	// DenyReadGlobs are component-name globs denied for reading below a
	// directory, e.g. `.env*` except `.env.example` in the workspace.
	DenyReadGlobs []NameGlob `json:"deny_read_globs,omitempty"`
	// boundGlobs are the existing entries the bind step's walk found for
	// DenyReadGlobs (BoundGlobMatches): like ProtectedPaths, what the tree
	// held when the policy was bound, so a copy made for another session
	// (cloneCompiled) drops them, and they do not travel in JSON.
	boundGlobs []boundGlob

	Network Network `json:"network"`

	// Capabilities are the only capabilities a session keeps (none by
	// default, root included).
	Capabilities []Capability `json:"capabilities,omitempty"`
	// Require are kernel mechanisms without which sessions must not run
	// (sandbox.require).
	Require []Requirement `json:"require,omitempty"`

	ExcludedCommands         []string `json:"excluded_commands,omitempty"`
	AllowUnsandboxedCommands bool     `json:"allow_unsandboxed_commands"`

	Env    Env    `json:"env"`
	Limits Limits `json:"limits"`
	Audit  Audit  `json:"audit"`

	Permissions Permissions `json:"permissions"`

	// Agent is the agent profile the session runs with, or nil.
	Agent *AgentProfile `json:"agent,omitempty"`

	// Locked lists the keys managed policy locked; recorded so `policy
	// show` and the daemon can explain refusals.
	Locked []string `json:"locked,omitempty"`
}

// Anchor is a filesystem location resolved at bind time. Kernel-side
// matching uses (Dev, Ino); Path is for humans and path-based backends.
type Anchor struct {
	// Path is absolute and symlink-resolved (when it exists).
	Path string `json:"path"`
	// Dev is st_dev as userspace sees it (unix.Stat_t.Dev). BPF code must
	// convert to the kernel's s_dev encoding (major<<20 | minor).
	Dev uint64 `json:"dev,omitempty"`
	// Ino is st_ino.
	Ino uint64 `json:"ino,omitempty"`
	// Dir is true when the anchor is a directory.
	Dir bool `json:"dir,omitempty"`
	// Exists is false for anchors that did not exist at bind time.
	Exists bool `json:"exists"`
	// Source says which file:line or flag set it ("default" for built-ins).
	Source string `json:"source,omitempty"`
}

// EntryType restricts a ProtectedPattern to a kind of filesystem entry.
type EntryType string

const (
	EntryAny  EntryType = "any"
	EntryDir  EntryType = "dir"
	EntryFile EntryType = "file"
)

// ProtectedPattern matches a run of consecutive path components anywhere
// below a writable root: the entry the run ends on, and everything below
// it, is protected. "*" matches exactly one component. For example
// [".git", "hooks"] protects every repository's hooks directory, nested
// repositories included, and [".claude"] protects that name at any depth.
type ProtectedPattern struct {
	Components []string  `json:"components"`
	Type       EntryType `json:"type"`
	Source     string    `json:"source,omitempty"`
	// Reason says what writing the entry would let a session do outside
	// its boundary (`policy show` prints it).
	Reason string `json:"reason,omitempty"`
	// CheckedAtEnd marks a file git writes for normal work (the .git file
	// of `git worktree add` and submodules, a new worktree's commondir):
	// a session may create one, and when it ends package quarantine checks
	// each it created and moves it out if it points git at a directory of
	// the session's choosing. One that exists stays read-only. Only
	// EntryFile patterns carry it: the BPF-LSM programs rely on a file
	// pattern matching the entry itself, never an ancestor.
	CheckedAtEnd bool `json:"checked_at_end,omitempty"`
}

// NameGlob denies entries whose final component matches Include (a glob)
// and none of Exclude, anywhere below Within.
type NameGlob struct {
	Within  string   `json:"within"`
	Include string   `json:"include"`
	Exclude []string `json:"exclude,omitempty"`
	Source  string   `json:"source,omitempty"`
}

// NetPolicy is the egress policy.
type NetPolicy string

const (
	NetNone      NetPolicy = "none"
	NetAllowlist NetPolicy = "allowlist"
	NetFull      NetPolicy = "full"
)

// Loopback says which loopback destinations a session may reach.
type Loopback string

const (
	LoopbackNone    Loopback = "none"
	LoopbackSession Loopback = "session" // only ports bound inside the session
	LoopbackAll     Loopback = "all"
)

// Network is the compiled egress policy.
type Network struct {
	Policy   NetPolicy `json:"policy"`
	Allow    []NetRule `json:"allow,omitempty"`
	Loopback Loopback  `json:"loopback"`
	// AllowUnixSockets lists pathname AF_UNIX sockets outside writable
	// roots that the session may connect to.
	AllowUnixSockets []string `json:"allow_unix_sockets,omitempty"`
	// MinTTLSeconds floors the lifetime of resolver-admitted addresses.
	MinTTLSeconds uint32 `json:"min_ttl_seconds"`
	// MaxTTLSeconds caps it (applied after the floor), so that an answer
	// with a huge TTL cannot keep an address admitted for days; 0 means
	// no cap (only policies compiled before the key existed).
	MaxTTLSeconds uint32 `json:"max_ttl_seconds,omitempty"`
	// UnknownHosts says what the resolver does with a name no allow entry
	// matches: refuse it (deny, also the meaning of "") or hold the query
	// and ask the daemon's approvers (ask).
	UnknownHosts UnknownHosts `json:"unknown_hosts,omitempty"`
	// AskTimeoutSeconds bounds how long an asked query waits for an
	// answer before it is refused.
	AskTimeoutSeconds uint32 `json:"ask_timeout_seconds,omitempty"`
}

// UnknownHosts is the resolver's treatment of names no rule allows.
type UnknownHosts string

const (
	UnknownHostsDeny UnknownHosts = "deny"
	UnknownHostsAsk  UnknownHosts = "ask"
)

// Defaults of the resolver keys.
const (
	DefaultMaxTTLSeconds     = 3600
	DefaultAskTimeoutSeconds = 30
	// MaxAskTimeoutSeconds bounds network.ask_timeout_seconds: a query
	// held longer has long been given up by any DNS client.
	MaxAskTimeoutSeconds = 600
)

// NetRule is one allow entry: either an address prefix or a hostname
// pattern ("example.com", "*.example.com" = one label, "**.example.com" =
// any depth), with optional port ranges (none = every port).
type NetRule struct {
	Prefix netip.Prefix `json:"prefix,omitzero"`
	// Host is lower-case, without trailing dot, IDNA (punycode) encoded.
	Host   string      `json:"host,omitempty"`
	Ports  []PortRange `json:"ports,omitempty"`
	Source string      `json:"source,omitempty"`
}

// PortRange is an inclusive port range.
type PortRange struct {
	First uint16 `json:"first"`
	Last  uint16 `json:"last"`
}

// Env controls the environment `run` hands to the command.
type Env struct {
	// Scrub are name globs removed from the environment (*_TOKEN, AWS_*, ...).
	Scrub []string `json:"scrub"`
	// Passthrough are names (globs) kept even when Scrub matches.
	Passthrough []string `json:"passthrough,omitempty"`
	// Set are "NAME=value" variables set for the command (an agent
	// profile's switches), replacing the caller's.
	Set []string `json:"set,omitempty"`
}

// Limits are cgroup resource limits; zero means unlimited.
type Limits struct {
	PidsMax   int64 `json:"pids_max,omitempty"`
	MemoryMax int64 `json:"memory_max,omitempty"`
}

// Audit configures the audit sink.
type Audit struct {
	Path string `json:"path"`
	// Journald also sends every record to systemd-journald (the file
	// stays the record of truth).
	Journald bool `json:"journald,omitempty"`
	// KernelBuffer is the size in bytes of the ring buffer the BPF
	// programs report refusals in, for a standalone run or attach (the
	// daemon's is its --kernel-buffer flag). 0 means DefaultKernelBuffer.
	KernelBuffer int64 `json:"kernel_buffer,omitempty"`
}

// Action is a permission rule's verdict.
type Action string

const (
	ActionAllow Action = "allow"
	ActionDeny  Action = "deny"
	ActionAsk   Action = "ask"
)

// Permissions is the application-layer rule set agents query.
type Permissions struct {
	Default Action                      `json:"default"`
	Rules   []PermissionRule            `json:"rules,omitempty"`
	Agents  map[string][]PermissionRule `json:"agents,omitempty"`
	// AgentDefaults are [agent.NAME.permission] default overrides.
	AgentDefaults map[string]Action `json:"agent_defaults,omitempty"`
}

// PermissionRule is one {tool, pattern, action} rule.
type PermissionRule struct {
	Tool    string `json:"tool"`
	Pattern string `json:"pattern"`
	Action  Action `json:"action"`
	Source  string `json:"source,omitempty"`
}

// Digest is a stable hash of the compiled policy, recorded in session
// start/stop audit events so a record can be tied to the exact rules.
func (c *Compiled) Digest() (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
