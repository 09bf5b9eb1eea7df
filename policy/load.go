package policy

import (
	"fmt"
	"io"
)

// DefaultManagedDir holds the managed (administrator) policy: policy.toml
// and policy.d/*.toml.
const DefaultManagedDir = "/etc/oxsupervise"

// ManagedDirEnv names the environment variable that points the policy verbs
// (and tests) at another managed directory instead of DefaultManagedDir.
// run and attach ignore it unless they choose to honour it.
const ManagedDirEnv = "OXSUPERVISE_MANAGED_DIR"

// DefaultAuditPath is where the audit log goes unless audit.path or
// --audit-log says otherwise.
const DefaultAuditPath = "/var/log/oxsupervise/audit.jsonl"

// DefaultKernelBuffer is the default size of the ring buffer the BPF
// programs report refusals in (audit.kernel_buffer): about 3 500
// filesystem refusals, more than a session's flood-control burst.
const DefaultKernelBuffer = 4 << 20

// ParseKernelBuffer reads a ring buffer size as audit.kernel_buffer takes
// it ("16M" or bytes), for the daemon's --kernel-buffer flag.
func ParseKernelBuffer(s string) (int64, error) {
	n, err := parseSize(s)
	if err == nil {
		err = checkKernelBuffer(n)
	}
	if err != nil {
		return 0, fmt.Errorf("kernel buffer %q: %w", s, err)
	}
	return n, nil
}

// checkKernelBuffer accepts ring buffer sizes every kernel and page size
// takes: a power of two from 64 KiB to 1 GiB.
func checkKernelBuffer(n int64) error {
	if n < 64<<10 || n > 1<<30 || n&(n-1) != 0 {
		return fmt.Errorf("%d bytes is not a power of two from 64K to 1G", n)
	}
	return nil
}

// LoadOptions are the inputs of Load besides the files themselves.
type LoadOptions struct {
	// ManagedDir defaults to DefaultManagedDir.
	ManagedDir string
	// Home is the user's home directory, for ~ and ~/.openoxide; defaults
	// to os.UserHomeDir().
	Home string
	// Workspace defaults to the current directory; --workspace overrides it.
	Workspace string
	// Flags may be nil (no CLI layer).
	Flags *Flags
	// Env looks up environment variables (TMPDIR); defaults to os.Getenv.
	Env func(string) string
	// Warn receives loud warnings (--yolo, full-access, skipped $TMPDIR);
	// defaults to io.Discard.
	Warn io.Writer
	// ScanCache is a directory where the bind step's scan for existing
	// protected entries remembers unchanged directories between starts
	// (internal/treescan); it must belong to the caller and be writable by
	// nobody else. Empty: every start reads every directory.
	ScanCache string
	// Argv is the command the session runs, from which the agent profile
	// is detected (package agent); nil for none.
	Argv []string
	// ParseCache, when set, keeps the parse of files whose bytes have not
	// changed since an earlier Load (a daemon's); nil parses every file.
	ParseCache *ParseCache
	// AgentState, when set, has the agent profile's missing state
	// entries created for that user before compiling (run does this;
	// policy show does not change the filesystem).
	AgentState *AgentOwner
}

// Effective is the merged policy before compilation: every key with the
// value that won and where it came from, for `policy show`.
type Effective struct {
	// Files are the policy files that were read, in layer order.
	Files []string `json:"files"`
	// Values are sorted by key.
	Values []EffectiveValue `json:"values"`
}

// EffectiveValue is one effective key.
type EffectiveValue struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
	// Source is "file:line:col", "flag --NAME", "env NAME" or "default".
	Source string `json:"source"`
	// Locked is set when managed policy locked this key.
	Locked bool `json:"locked,omitempty"`
}

// Load reads every policy layer (managed policy.toml and policy.d/*.toml,
// ~/.openoxide/config.toml, <workspace>/.openoxide/config.toml, --config,
// CLI flags), merges them under the managed locks, and compiles the result
// against the filesystem: Resolve, then Bind. Any error names the
// file:line:col (or flag) at fault; Load never returns a silently weaker
// policy.
func Load(opts LoadOptions) (*Compiled, *Effective, error) {
	r, eff, err := Resolve(opts)
	if err != nil {
		return nil, nil, err
	}
	c, err := r.Bind()
	if err != nil {
		return nil, nil, err
	}
	return c, eff, nil
}
