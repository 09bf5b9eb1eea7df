package macos

import (
	"errors"
	"fmt"
	"path"
	"sort"
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

// protection is the set of filters that keep protected entries read-only.
type protection struct {
	filters []string // (require-not X) inside write allows; (deny file-write* X) at the end
	labels  []string // rule label per filter
	unlink  []string // filters for ancestors that must not be renamed/removed
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

type denySet struct {
	filters []string
	labels  []string
	unlink  []string
}

// denyReadFilters builds one filter per denied-read anchor and glob, and the
// ancestor filters that stop an anchor being moved somewhere readable.
func (g *generator) denyReadFilters() (denySet, error) {
	var d denySet
	seenAncestor := map[string]bool{}
	for i, a := range g.c.DenyRead {
		p, err := cleanPath("deny_read entry", a.Path)
		if err != nil {
			return d, err
		}
		ref := g.param("DENY_READ", p)
		label := "deny-read-" + strconv.Itoa(i)
		g.rules[label] = "denied read: " + p
		d.filters = append(d.filters, "(require-any (literal "+ref+") (subpath "+ref+"))")
		d.labels = append(d.labels, label)
		for _, anc := range ancestors(p) {
			if seenAncestor[anc] {
				continue
			}
			seenAncestor[anc] = true
			d.unlink = append(d.unlink, "(literal "+g.param("DENY_READ_ANCESTOR", anc)+")")
		}
	}
	for i, glob := range g.c.DenyReadGlobs {
		dir, err := cleanPath("deny_read_globs within", glob.Within)
		if err != nil {
			return d, err
		}
		inc, err := globRegex(glob.Include)
		if err != nil {
			return d, fmt.Errorf("deny_read_globs include (%s): %w", glob.Source, err)
		}
		f := "(require-all (subpath " + g.param("DENY_GLOB_WITHIN", dir) + ") (regex " + regexLiteral("/"+inc+"$") + ")"
		for _, ex := range glob.Exclude {
			exr, err := globRegex(ex)
			if err != nil {
				return d, fmt.Errorf("deny_read_globs exclude (%s): %w", glob.Source, err)
			}
			f += " (require-not (regex " + regexLiteral("/"+exr+"$") + "))"
		}
		f += ")"
		label := "deny-read-glob-" + strconv.Itoa(i)
		g.rules[label] = fmt.Sprintf("denied read: %s below %s (except %v)", glob.Include, dir, glob.Exclude)
		d.filters = append(d.filters, f)
		d.labels = append(d.labels, label)
	}
	return d, nil
}

// protection builds the filters for protected entries: a component regex
// per pattern (any depth, including entries that do not exist yet), a
// literal+subpath parameter per pattern below each writable root (so first
// creation is refused even if regex matching differed), and one per
// resolved protected path.
func (g *generator) protection() (protection, error) {
	var p protection
	seenUnlink := map[string]bool{}
	var roots []string
	for _, a := range g.c.WritableRoots {
		r, err := cleanPath("writable root", a.Path)
		if err != nil {
			return p, err
		}
		roots = append(roots, r)
	}
	for i, pat := range g.c.ProtectedPatterns {
		if len(pat.Components) == 0 {
			return p, fmt.Errorf("protected pattern %d (%s) has no components", i, pat.Source)
		}
		frags := make([]string, len(pat.Components))
		literal := true
		for j, comp := range pat.Components {
			if comp == "*" {
				frags[j] = "[^/]+"
				literal = false
				continue
			}
			f, err := componentRegex(comp)
			if err != nil {
				return p, fmt.Errorf("protected pattern %q (%s): %w", strings.Join(pat.Components, "/"), pat.Source, err)
			}
			frags[j] = f
		}
		label := "protected-" + strconv.Itoa(i)
		desc := "protected entry: " + strings.Join(pat.Components, "/")
		if pat.Type != "" && pat.Type != policy.EntryAny {
			desc += " (" + string(pat.Type) + ")"
		}
		g.rules[label] = desc
		joined := "/" + strings.Join(frags, "/")
		var filter string
		switch pat.Type {
		case policy.EntryFile:
			// A file pattern (".git" as a gitdir: file) must not also
			// freeze the directory of the same name, or git commit breaks.
			filter = "(require-all (regex " + regexLiteral(joined+"$") + ") (require-not (vnode-type DIRECTORY)))"
		case policy.EntryDir, policy.EntryAny, "":
			filter = "(regex " + regexLiteral(joined+"(/|$)") + ")"
		default:
			return p, fmt.Errorf("protected pattern %q (%s): unknown entry type %q", strings.Join(pat.Components, "/"), pat.Source, pat.Type)
		}
		p.filters = append(p.filters, filter)
		p.labels = append(p.labels, label)
		for j := 1; j < len(frags); j++ {
			re := "/" + strings.Join(frags[:j], "/") + "$"
			if !seenUnlink[re] {
				seenUnlink[re] = true
				p.unlink = append(p.unlink, "(regex "+regexLiteral(re)+")")
			}
		}
		if !literal {
			continue
		}
		rel := strings.Join(pat.Components, "/")
		for ri, r := range roots {
			ref := g.param("PROTECTED", path.Join(r, rel))
			plabel := label + "-root-" + strconv.Itoa(ri)
			g.rules[plabel] = desc + " below writable root " + r
			if pat.Type == policy.EntryFile {
				p.filters = append(p.filters, "(require-all (literal "+ref+") (require-not (vnode-type DIRECTORY)))")
			} else {
				p.filters = append(p.filters, "(require-any (literal "+ref+") (subpath "+ref+"))")
			}
			p.labels = append(p.labels, plabel)
		}
	}
	for i, a := range g.c.ProtectedPaths {
		pp, err := cleanPath("protected path", a.Path)
		if err != nil {
			return p, err
		}
		ref := g.param("PROTECTED", pp)
		label := "protected-path-" + strconv.Itoa(i)
		g.rules[label] = "protected path: " + pp
		p.filters = append(p.filters, "(require-any (literal "+ref+") (subpath "+ref+"))")
		p.labels = append(p.labels, label)
		for _, anc := range ancestors(pp) {
			inRoot := false
			for _, r := range roots {
				if within(anc, r) && anc != r {
					inRoot = true
				}
			}
			if !inRoot || seenUnlink["\x00"+anc] {
				continue
			}
			seenUnlink["\x00"+anc] = true
			p.unlink = append(p.unlink, "(literal "+g.param("PROTECTED_ANCESTOR", anc)+")")
		}
	}
	return p, nil
}

// reads emits the read rules: everything but denied anchors, or (restricted)
// only platform, readable and writable roots.
func (g *generator) reads(d denySet, roots []string) error {
	g.line("")
	g.line("; reads (" + string(g.c.ReadAccess) + ")")
	// Metadata of every path (stat, realpath, getcwd walks) is readable;
	// denied anchors are excluded so their existence does not leak.
	g.allow("file-read-metadata", "", d.filters)
	switch g.c.ReadAccess {
	case policy.ReadAccessFull, "":
		g.allow("file-read*", "", d.filters)
	case policy.ReadAccessRestricted:
		var any []string
		for _, p := range platformReadLiterals {
			any = append(any, "(literal "+stringLiteral(p)+")")
		}
		for _, p := range platformReadRoots {
			any = append(any, "(subpath "+stringLiteral(p)+")")
		}
		for _, a := range g.c.ReadableRoots {
			p, err := cleanPath("readable root", a.Path)
			if err != nil {
				return err
			}
			any = append(any, "(subpath "+g.param("READABLE_ROOT", p)+")")
		}
		for _, r := range roots {
			any = append(any, "(subpath "+r+")")
		}
		g.allow("file-read*", "(require-any\n      "+strings.Join(any, "\n      ")+")", d.filters)
	default:
		return fmt.Errorf("unknown read access %q", g.c.ReadAccess)
	}
	return nil
}

// network emits the network rules. Seatbelt can only name "*" or
// "localhost" as a remote host, so allow lists are delegated to the
// supervisor's proxy on a loopback port.
func (g *generator) network(roots []string) error {
	net := g.c.Network
	g.line("")
	g.line("; network: " + string(net.Policy) + ", loopback " + string(net.Loopback))
	// Unix-domain sockets below writable roots (build tools, test servers)
	// and explicitly listed ones; everything else (docker.sock, ssh-agent)
	// stays denied. socket(AF_UNIX) itself carries no path, so creating
	// one is a separate system-socket permission.
	g.line("(allow system-socket (socket-domain AF_UNIX))")
	g.line("(allow system-socket (require-all (socket-domain AF_SYSTEM) (socket-protocol 2)))")
	for _, r := range roots {
		g.line("(allow network-bind (local unix-socket (subpath " + r + ")))")
		g.line("(allow network-outbound (remote unix-socket (subpath " + r + ")))")
	}
	socks := append([]string{}, net.AllowUnixSockets...)
	sort.Strings(socks)
	for _, s := range socks {
		p, err := cleanPath("allowed unix socket", s)
		if err != nil {
			return err
		}
		g.line("(allow network-outbound (remote unix-socket (literal " + g.param("UNIX_SOCKET", p) + ")))")
	}
	switch net.Loopback {
	// Binding is matched on the local endpoint as "*:*": dual-stack
	// sockets bound to 127.0.0.1 appear as ::ffff:127.0.0.1, which
	// Seatbelt's "localhost" does not match. Outbound traffic is what the
	// policy limits, and it stays governed by the remote-endpoint rules.
	case policy.LoopbackAll:
		g.line(`(allow network-bind network-inbound (local ip "*:*"))`)
		g.line(`(allow network-outbound (remote ip "localhost:*"))`)
	case policy.LoopbackSession:
		g.line(`(allow network-bind network-inbound (local ip "*:*"))`)
		g.warns = append(g.warns, "loopback \"session\" cannot be expressed in Seatbelt: the session may listen on loopback but outbound loopback connections are denied (fail closed)")
	case policy.LoopbackNone, "":
	default:
		return fmt.Errorf("unknown loopback setting %q", net.Loopback)
	}
	switch net.Policy {
	case policy.NetNone:
	case policy.NetAllowlist:
		if g.opts.ProxyPort == 0 {
			return fmt.Errorf("%w: network allowlist needs the supervisor's proxy port (Seatbelt cannot filter remote hosts)", ErrUnsupportedPolicy)
		}
		g.line(`(allow network-outbound (remote ip "localhost:` + strconv.Itoa(int(g.opts.ProxyPort)) + `"))`)
		g.warns = append(g.warns, "network allowlist on macOS is enforced by the supervisor's proxy on localhost:"+strconv.Itoa(int(g.opts.ProxyPort))+"; Seatbelt only confines the session to that port")
	case policy.NetFull:
		// Not (allow network*): that would also open every Unix-domain
		// socket (docker.sock, ssh-agent), which stay denied unless listed.
		g.line(`(allow network-outbound (remote ip "*:*"))`)
		g.line(`(allow network-bind network-inbound (local ip "*:*"))`)
		g.line("(allow system-socket (socket-domain AF_INET) (socket-domain AF_INET6))")
		g.line(`(allow network-outbound (remote unix-socket (literal "/private/var/run/mDNSResponder")))`)
		g.line("(allow mach-lookup")
		for _, name := range []string{"com.apple.dnssd.service", "com.apple.trustd.agent", "com.apple.ocspd", "com.apple.networkd"} {
			g.line("  (global-name " + stringLiteral(name) + ")")
		}
		g.line(")")
	default:
		return fmt.Errorf("unknown network policy %q", net.Policy)
	}
	if net.Policy == policy.NetFull && net.Loopback != policy.LoopbackAll {
		// Later rules win in SBPL: take loopback back out of "*:*".
		g.line(`(deny network-outbound (remote ip "localhost:*") ` + g.message("loopback", "loopback "+string(net.Loopback)) + ")")
	}
	return nil
}
