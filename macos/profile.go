package macos

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/openoxide/oxsupervise/policy"
)

// Options carries what the profile needs beyond the compiled policy.
type Options struct {
	// SessionID tags every deny rule's message so the session's denials
	// can be told apart in the unified log. It must match
	// [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
	SessionID string
	// ProxyPort is the loopback port of the supervisor's resolver/proxy.
	// Network policy "allowlist" admits only localhost:ProxyPort (Seatbelt
	// cannot name remote hosts, so the proxy enforces the allow list) and
	// is refused when ProxyPort is 0.
	ProxyPort uint16
}

// Param is one sandbox-exec -D parameter.
type Param struct {
	Key   string
	Value string
}

// Profile is a generated Seatbelt profile plus the parameters it reads.
type Profile struct {
	// Text is the SBPL source passed to sandbox-exec -p.
	Text string
	// Params are passed as -D KEY=VALUE, in this order.
	Params []Param
	// Rules maps the rule label carried in each deny message
	// ("oxs session=ID rule=LABEL") to what the rule protects, so an audit
	// record can name the anchor or pattern that decided.
	Rules map[string]string
	// Warnings are guarantees the macOS backend weakens or cannot give
	// for this policy; callers print them before the command starts.
	Warnings []string
	// Unsandboxed is true in full-access mode: there is no profile and the
	// command runs without Seatbelt.
	Unsandboxed bool
}

// SandboxExecArgs is the argument vector (without the program name) that
// runs argv under the profile: -p PROFILE, -D KEY=VALUE..., --, argv.
func (p *Profile) SandboxExecArgs(argv []string) []string {
	args := []string{"-p", p.Text}
	for _, prm := range p.Params {
		args = append(args, "-D", prm.Key+"="+prm.Value)
	}
	args = append(args, "--")
	return append(args, argv...)
}

// ErrUnsupportedPolicy wraps every refusal to build a profile for a policy
// this backend cannot honour.
var ErrUnsupportedPolicy = errors.New("policy not supported by the macOS Seatbelt backend")

// platformReadRoots are readable under read_only_access = "restricted":
// what the dynamic loader, shells, compilers and Xcode's command-line tools
// need. /etc, /var and /tmp are symlinks into /private and are listed as
// literals so their resolution works.
var platformReadRoots = []string{
	"/System", "/usr", "/bin", "/sbin", "/Library", "/Applications/Xcode.app",
	"/opt", "/private/etc", "/private/var/db/timezone", "/private/var/select", "/dev",
}

var platformReadLiterals = []string{"/", "/etc", "/var", "/tmp", "/private"}

// generator accumulates one profile.
type generator struct {
	c       *policy.Compiled
	opts    Options
	text    strings.Builder
	params  []Param
	byValue map[string]string // prefix+"\x00"+value -> key, so one path gets one key
	counter map[string]int
	rules   map[string]string
	warns   []string
}

// Generate builds the Seatbelt profile for c. It fails, naming the input,
// when c is inconsistent or asks for something Seatbelt cannot enforce.
func Generate(c *policy.Compiled, opts Options) (*Profile, error) {
	if c == nil {
		return nil, errors.New("generate seatbelt profile: nil compiled policy")
	}
	if !sessionIDPattern.MatchString(opts.SessionID) {
		return nil, fmt.Errorf("generate seatbelt profile: session id %q must match %s", opts.SessionID, sessionIDPattern)
	}
	g := &generator{c: c, opts: opts, byValue: map[string]string{}, counter: map[string]int{}, rules: map[string]string{}}
	var err error
	switch c.Mode {
	case policy.ModeFullAccess:
		return &Profile{
			Unsandboxed: true,
			Rules:       map[string]string{},
			Warnings:    []string{"full-access mode: the command runs WITHOUT any Seatbelt sandbox; no filesystem, network or process restriction applies"},
		}, nil
	case policy.ModeExternalSandbox:
		if c.FilesystemRules {
			return nil, fmt.Errorf("generate seatbelt profile: mode %s with filesystem_rules=true is inconsistent", c.Mode)
		}
		err = g.external()
	case policy.ModeReadOnly, policy.ModeWorkspaceWrite:
		if !c.FilesystemRules {
			return nil, fmt.Errorf("generate seatbelt profile: mode %s with filesystem_rules=false is inconsistent", c.Mode)
		}
		if c.Mode == policy.ModeReadOnly && len(c.WritableRoots) > 0 {
			return nil, fmt.Errorf("generate seatbelt profile: read-only mode with %d writable roots is inconsistent", len(c.WritableRoots))
		}
		err = g.confined()
	default:
		return nil, fmt.Errorf("generate seatbelt profile: unknown mode %q", c.Mode)
	}
	if err != nil {
		return nil, fmt.Errorf("generate seatbelt profile: %w", err)
	}
	return &Profile{Text: g.text.String(), Params: g.params, Rules: g.rules, Warnings: g.warns}, nil
}

func (g *generator) line(s string) {
	g.text.WriteString(s)
	g.text.WriteByte('\n')
}

// param registers value under a fresh KEY_n (or the key it already has) and
// returns the SBPL expression reading it.
func (g *generator) param(prefix, value string) string {
	id := prefix + "\x00" + value
	if key, ok := g.byValue[id]; ok {
		return paramRef(key)
	}
	key := prefix + "_" + strconv.Itoa(g.counter[prefix])
	g.counter[prefix]++
	g.byValue[id] = key
	g.params = append(g.params, Param{Key: key, Value: value})
	return paramRef(key)
}

// message is the modifier attached to every deny rule. label is generated
// by this package (never policy text) and described in Profile.Rules.
func (g *generator) message(label, description string) string {
	g.rules[label] = description
	return `(with message "oxs session=` + g.opts.SessionID + ` rule=` + label + `")`
}

// cleanPath checks that p is an absolute, clean path that can travel as a
// -D parameter.
func cleanPath(what, p string) (string, error) {
	if p == "" || p[0] != '/' {
		return "", fmt.Errorf("%s %q is not an absolute path", what, p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%s %q contains a NUL byte", what, p)
	}
	return path.Clean(p), nil
}

// ancestors lists the directories above p, nearest first, excluding "/".
func ancestors(p string) []string {
	var out []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		out = append(out, d)
	}
	return out
}

// within reports whether p is root or below it.
func within(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// allow emits (allow OPS (require-all BASE (require-not EX)...)); an empty
// base means "everything".
func (g *generator) allow(ops, base string, excludes []string) {
	if len(excludes) == 0 {
		if base == "" {
			g.line("(allow " + ops + ")")
		} else {
			g.line("(allow " + ops + " " + base + ")")
		}
		return
	}
	g.line("(allow " + ops)
	g.line("  (require-all")
	if base != "" {
		g.line("    " + base)
	}
	for _, ex := range excludes {
		g.line("    (require-not " + ex + ")")
	}
	g.line("  ))")
}

func (g *generator) header(kind string) {
	g.line("; oxsupervise Seatbelt profile (" + kind + ") for session " + g.opts.SessionID + ", mode " + string(g.c.Mode) + ".")
	g.line("; Generated; paths are sandbox-exec -D parameters, never part of this text.")
	g.line("(version 1)")
}

// external is the external-sandbox profile: the filesystem is someone
// else's job, the network still follows the policy.
func (g *generator) external() error {
	g.header("external-sandbox")
	g.line("(allow default)")
	net := g.c.Network
	var keep []string
	switch net.Policy {
	case policy.NetFull:
		return nil
	case policy.NetNone:
	case policy.NetAllowlist:
		if g.opts.ProxyPort == 0 {
			return fmt.Errorf("%w: network allowlist needs the supervisor's proxy port (Seatbelt cannot filter remote hosts)", ErrUnsupportedPolicy)
		}
		keep = append(keep, `(remote ip "localhost:`+strconv.Itoa(int(g.opts.ProxyPort))+`")`)
		g.warns = append(g.warns, "network allowlist on macOS is enforced by the supervisor's proxy on localhost:"+strconv.Itoa(int(g.opts.ProxyPort))+"; Seatbelt only confines the session to that port")
	default:
		return fmt.Errorf("unknown network policy %q", net.Policy)
	}
	if net.Loopback == policy.LoopbackAll {
		keep = append(keep, `(remote ip "localhost:*")`)
	}
	if net.Loopback == policy.LoopbackSession {
		g.warns = append(g.warns, "loopback \"session\" cannot be expressed in Seatbelt; outbound loopback is denied (fail closed)")
	}
	msg := g.message("network", "network policy "+string(net.Policy))
	if len(keep) == 0 {
		g.line(`(deny network-outbound (remote ip "*:*") ` + msg + `)`)
		return nil
	}
	g.line("(deny network-outbound")
	g.line("  (require-all")
	g.line(`    (remote ip "*:*")`)
	for _, k := range keep {
		g.line("    (require-not " + k + ")")
	}
	g.line("  )")
	g.line("  " + msg + ")")
	return nil
}

func (g *generator) confined() error {
	g.header("confined")
	g.line("(deny default " + g.message("default", "deny default: operation not allowed by the policy") + ")")
	g.base()

	denyRead, err := g.denyReadFilters()
	if err != nil {
		return err
	}
	prot, err := g.protection()
	if err != nil {
		return err
	}
	roots := make([]string, 0, len(g.c.WritableRoots))
	for _, a := range g.c.WritableRoots {
		p, err := cleanPath("writable root", a.Path)
		if err != nil {
			return err
		}
		roots = append(roots, g.param("WRITABLE_ROOT", p))
	}
	if err := g.reads(denyRead, roots); err != nil {
		return err
	}

	g.line("")
	g.line("; writes: below writable roots, except protected entries and denied reads")
	writeExcludes := append(append([]string{}, prot.filters...), denyRead.filters...)
	if len(roots) > 0 {
		var any []string
		for _, r := range roots {
			any = append(any, "(subpath "+r+")")
		}
		g.allow("file-write*", "(require-any "+strings.Join(any, " ")+")", writeExcludes)
	}

	if err := g.network(roots); err != nil {
		return err
	}

	// The explicit denies come last and duplicate the exclusions above, so
	// the result does not depend on how Seatbelt orders allow and deny
	// rules, and so each denial carries a message naming its rule.
	g.line("")
	g.line("; explicit denies (also excluded from the allows above)")
	for i, f := range prot.filters {
		g.line("(deny file-write* " + f + " " + g.message(prot.labels[i], g.rules[prot.labels[i]]) + ")")
	}
	for i, f := range prot.unlink {
		label := "protected-ancestor-" + strconv.Itoa(i)
		g.line("(deny file-write-unlink " + f + " " + g.message(label, "ancestor of a protected entry: not renamed or removed") + ")")
	}
	for i, f := range denyRead.filters {
		g.line("(deny file-read* file-write* " + f + " " + g.message(denyRead.labels[i], g.rules[denyRead.labels[i]]) + ")")
	}
	for i, f := range denyRead.unlink {
		label := "deny-read-ancestor-" + strconv.Itoa(i)
		g.line("(deny file-write-unlink " + f + " " + g.message(label, "ancestor of a denied-read anchor: not renamed or removed") + ")")
	}
	return nil
}

// base is what ordinary command-line tools need regardless of policy.
func (g *generator) base() {
	g.line("")
	g.line("; base: processes, terminals, devices and services ordinary tools need")
	g.line("(allow process-exec)")
	g.line("(allow process-fork)")
	g.line("(allow signal (target same-sandbox))")
	g.line("(allow process-info* (target same-sandbox))")
	// kern.procargs* would hand out other processes' arguments and
	// environments (and the secrets in them).
	g.line("(allow sysctl-read")
	g.line("  (require-all")
	g.line(`    (require-any (sysctl-name-prefix "hw.") (sysctl-name-prefix "machdep.") (sysctl-name-prefix "kern.")`)
	g.line(`                 (sysctl-name-prefix "vm.") (sysctl-name "sysctl.proc_cputype") (sysctl-name "security.mac.lockdown_mode_state"))`)
	g.line(`    (require-not (sysctl-name-prefix "kern.procargs"))))`)
	g.line("(allow pseudo-tty)")
	g.line(`(allow file-read* file-write* file-ioctl (literal "/dev/ptmx") (regex #"^/dev/ttys[0-9]+$"))`)
	g.line(`(allow file-read* file-write-data file-ioctl (literal "/dev/tty"))`)
	g.line(`(allow file-read* file-write-data (literal "/dev/null") (literal "/dev/zero") (literal "/dev/dtracehelper") (regex #"^/dev/fd/[0-9]+$"))`)
	g.line(`(allow file-read* (literal "/dev/random") (literal "/dev/urandom"))`)
	g.line("(allow user-preference-read)")
	g.line("(allow ipc-posix-sem)")
	g.line(`(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))`)
	g.line("(allow mach-lookup")
	for _, name := range []string{
		"com.apple.system.opendirectoryd.libinfo",
		"com.apple.system.opendirectoryd.membership",
		"com.apple.system.logger",
		"com.apple.logd",
		"com.apple.system.notification_center",
		"com.apple.PowerManagement.control",
		"com.apple.bsd.dirhelper",
	} {
		g.line("  (global-name " + stringLiteral(name) + ")")
	}
	g.line(")")
}
