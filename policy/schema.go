package policy

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// valueKind is the TOML shape a key accepts.
type valueKind int

const (
	kindString valueKind = iota
	kindBool
	kindInt  // non-negative integer
	kindSize // non-negative integer of bytes, or a string like "2G"
	kindStrings
)

func (k valueKind) String() string {
	switch k {
	case kindString:
		return "a string"
	case kindBool:
		return "a boolean"
	case kindInt:
		return "a non-negative integer"
	case kindSize:
		return `a size (bytes, or a string like "512M", "2G")`
	case kindStrings:
		return "an array of strings"
	}
	return "?"
}

// tighten says how a layer below a managed lock may change the key.
type tighten int

const (
	tightenEqual    tighten = iota // no change at all
	tightenRank                    // enum value at most as loose (enum lists strictest first)
	tightenTrue                    // may only become true
	tightenFalse                   // may only become false
	tightenSubset                  // may only drop elements
	tightenSuperset                // may only add elements
	tightenLower                   // a non-zero number may only decrease (0 = unlimited)
	tightenHigher                  // a number may only increase
)

// keySpec describes one policy key.
type keySpec struct {
	kind valueKind
	// enum lists the accepted values (for kindString, or each element of
	// kindStrings), strictest first when tighten is tightenRank.
	enum    []string
	tighten tighten
	// check validates one string (or list element) beyond enum.
	check func(string) error
	// checkNum validates a kindInt or kindSize value beyond its sign.
	checkNum func(int64) error
	hint     string
}

var (
	modeNames     = []string{string(ModeReadOnly), string(ModeWorkspaceWrite), string(ModeExternalSandbox), string(ModeFullAccess)}
	approvalNames = []string{string(ApprovalUntrusted), string(ApprovalOnRequest), string(ApprovalOnFailure), string(ApprovalNever)}
)

// schema lists every key a policy file may set (outside [[permissions.rules]],
// [agent.NAME.permission] and [managed], which are decoded separately).
// Keep DESIGN §2's keys; add, never rename.
func schema() map[string]keySpec {
	s := map[string]keySpec{
		"sandbox.mode":                       {kind: kindString, enum: modeNames, tighten: tightenRank},
		"sandbox.approval":                   {kind: kindString, enum: approvalNames, tighten: tightenRank},
		"sandbox.allowed_modes":              {kind: kindStrings, enum: modeNames, tighten: tightenSubset},
		"sandbox.writable_roots":             {kind: kindStrings, tighten: tightenSubset, check: checkPath, hint: "absolute, ~/..., or relative to the workspace"},
		"sandbox.exclude_slash_tmp":          {kind: kindBool, tighten: tightenTrue},
		"sandbox.exclude_tmpdir_env_var":     {kind: kindBool, tighten: tightenTrue},
		"sandbox.read_only_access":           {kind: kindString, enum: []string{string(ReadAccessRestricted), string(ReadAccessFull)}, tighten: tightenRank},
		"sandbox.readable_roots":             {kind: kindStrings, tighten: tightenSubset, check: checkPath},
		"sandbox.protected_subpaths":         {kind: kindStrings, tighten: tightenSuperset, check: checkProtected, hint: "a name or relative path like \".terraform\" or \"deploy/keys\", or an absolute/~ path"},
		"sandbox.protect_git":                {kind: kindString, enum: []string{"all", "escalation"}, tighten: tightenRank},
		"sandbox.deny_read":                  {kind: kindStrings, tighten: tightenSuperset, check: checkPath},
		"sandbox.excluded_commands":          {kind: kindStrings, tighten: tightenSubset, check: checkNonEmpty},
		"sandbox.allow_unsandboxed_commands": {kind: kindBool, tighten: tightenFalse},
		"sandbox.require":                    {kind: kindStrings, enum: requirementNames, tighten: tightenSuperset, hint: "kernel mechanisms sessions need; without them run refuses"},
		"sandbox.capabilities":               {kind: kindStrings, enum: capabilityNames(), tighten: tightenSubset, hint: "capabilities a session keeps; every other one is dropped, root included"},
		"network.policy":                     {kind: kindString, enum: []string{string(NetNone), string(NetAllowlist), string(NetFull)}, tighten: tightenRank},
		"network.allow":                      {kind: kindStrings, tighten: tightenSubset, check: checkNetEntry, hint: `entries look like "github.com", "*.npmjs.org", "**.example.com:443", "10.0.0.0/8:443", "[2001:db8::1]:22"`},
		"network.loopback":                   {kind: kindString, enum: []string{string(LoopbackNone), string(LoopbackSession), string(LoopbackAll)}, tighten: tightenRank},
		"network.allow_unix_sockets":         {kind: kindStrings, tighten: tightenSubset, check: checkPath},
		"network.min_ttl_seconds":            {kind: kindInt, tighten: tightenLower},
		"network.max_ttl_seconds":            {kind: kindInt, tighten: tightenLower},
		"network.unknown_hosts":              {kind: kindString, enum: []string{string(UnknownHostsDeny), string(UnknownHostsAsk)}, tighten: tightenRank},
		"network.ask_timeout_seconds":        {kind: kindInt, tighten: tightenLower},
		"env.passthrough":                    {kind: kindStrings, tighten: tightenSubset, check: checkEnvGlob},
		"env.scrub":                          {kind: kindStrings, tighten: tightenSuperset, check: checkEnvGlob},
		"limits.pids_max":                    {kind: kindInt, tighten: tightenLower},
		"limits.memory_max":                  {kind: kindSize, tighten: tightenLower},
		"audit.path":                         {kind: kindString, tighten: tightenEqual, check: checkPath},
		"audit.journald":                     {kind: kindBool, tighten: tightenTrue},
		"audit.kernel_buffer":                {kind: kindSize, tighten: tightenHigher, checkNum: checkKernelBuffer, hint: `a power of two from 64K to 1G, e.g. "16M"`},
		"permissions.default":                {kind: kindString, enum: []string{string(ActionDeny), string(ActionAsk), string(ActionAllow)}, tighten: tightenRank},
	}
	maps.Copy(s, observabilitySchema()) // observability.go
	return s
}

// aliasNetwork is the blueprint's shorthand `[sandbox] network = bool`
// for network.policy = "full" / "none".
const aliasNetwork = "sandbox.network"

// lockable returns every name [managed] locked = [...] accepts: the keys,
// their tables (locking each key in it), and the rule sets.
func lockable() []string {
	var out []string
	tables := map[string]bool{}
	for k := range schema() {
		out = append(out, k)
		tables[k[:strings.IndexByte(k, '.')]] = true
	}
	for t := range tables {
		out = append(out, t)
	}
	out = append(out, "permissions.rules", "agent")
	sort.Strings(out)
	return out
}

// expandLock turns a lock name into the keys it locks.
func expandLock(name string) []string {
	if name == "permissions.rules" || name == "agent" {
		return []string{name}
	}
	if _, ok := schema()[name]; ok {
		return []string{name}
	}
	var out []string
	for k := range schema() {
		if strings.HasPrefix(k, name+".") {
			out = append(out, k)
		}
	}
	if name == "permissions" {
		out = append(out, "permissions.rules", "agent")
	}
	sort.Strings(out)
	return out
}

// defaults are the built-in values of every key; list keys' defaults are
// extended at compile time by built-in sets (credential paths, protected
// names, scrubbed variables) that no configuration can remove.
func defaults() map[string]any {
	d := map[string]any{
		"sandbox.mode":                       string(ModeWorkspaceWrite),
		"sandbox.approval":                   string(ApprovalUntrusted),
		"sandbox.allowed_modes":              slices.Clone(modeNames),
		"sandbox.writable_roots":             []string{},
		"sandbox.exclude_slash_tmp":          false,
		"sandbox.exclude_tmpdir_env_var":     false,
		"sandbox.read_only_access":           string(ReadAccessFull),
		"sandbox.readable_roots":             []string{},
		"sandbox.protected_subpaths":         []string{},
		"sandbox.protect_git":                "escalation",
		"sandbox.deny_read":                  []string{},
		"sandbox.excluded_commands":          []string{},
		"sandbox.allow_unsandboxed_commands": true,
		"sandbox.capabilities":               []string{},
		"sandbox.require":                    []string{},
		"network.policy":                     string(NetNone),
		"network.allow":                      []string{},
		"network.loopback":                   string(LoopbackSession),
		"network.allow_unix_sockets":         []string{},
		"network.min_ttl_seconds":            int64(30),
		"network.max_ttl_seconds":            int64(DefaultMaxTTLSeconds),
		"network.unknown_hosts":              string(UnknownHostsDeny),
		"network.ask_timeout_seconds":        int64(DefaultAskTimeoutSeconds),
		"env.passthrough":                    []string{},
		"env.scrub":                          []string{},
		"limits.pids_max":                    int64(0),
		"limits.memory_max":                  int64(0),
		"audit.path":                         DefaultAuditPath,
		"audit.journald":                     false,
		"audit.kernel_buffer":                int64(DefaultKernelBuffer),
		"permissions.default":                string(ActionAsk),
	}
	maps.Copy(d, observabilityDefaults()) // observability.go
	return d
}

func checkNonEmpty(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("must not be empty")
	}
	return nil
}

func checkPath(s string) error {
	if err := checkNonEmpty(s); err != nil {
		return err
	}
	if strings.ContainsRune(s, 0) {
		return fmt.Errorf("contains a NUL byte")
	}
	if strings.HasPrefix(s, "~") && s != "~" && !strings.HasPrefix(s, "~/") {
		return fmt.Errorf("%q: only ~ and ~/... are expanded, not ~user", s)
	}
	return nil
}

func checkProtected(s string) error {
	if err := checkPath(s); err != nil {
		return err
	}
	for _, c := range strings.Split(s, "/") {
		if c == ".." {
			return fmt.Errorf("%q: \"..\" is not allowed", s)
		}
	}
	return nil
}

func checkEnvGlob(s string) error {
	if err := checkNonEmpty(s); err != nil {
		return err
	}
	for _, c := range s {
		if !(c == '_' || c == '*' || c == '?' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return fmt.Errorf("%q: environment names and globs use letters, digits, _, * and ?", s)
		}
	}
	return nil
}

func checkNetEntry(s string) error {
	_, err := ParseNetRule(s)
	return err
}

// rank is the position of v in enum (strictest first).
func rank(enum []string, v string) int {
	return slices.Index(enum, v)
}

// looser reports whether lower loosens locked under rule t.
func (ks keySpec) looser(locked, lower any) bool {
	switch ks.tighten {
	case tightenEqual:
		return fmt.Sprint(locked) != fmt.Sprint(lower)
	case tightenRank:
		return rank(ks.enum, lower.(string)) > rank(ks.enum, locked.(string))
	case tightenTrue:
		return locked.(bool) && !lower.(bool)
	case tightenFalse:
		return !locked.(bool) && lower.(bool)
	case tightenSubset:
		for _, v := range lower.([]string) {
			if !slices.Contains(locked.([]string), v) {
				return true
			}
		}
		return false
	case tightenSuperset:
		for _, v := range locked.([]string) {
			if !slices.Contains(lower.([]string), v) {
				return true
			}
		}
		return false
	case tightenLower:
		l, w := locked.(int64), lower.(int64)
		return l != 0 && (w == 0 || w > l)
	case tightenHigher:
		return lower.(int64) < locked.(int64)
	}
	return true
}

func (ks keySpec) tightenHint(key string) string {
	switch ks.tighten {
	case tightenEqual:
		return key + " is locked by managed policy and cannot be changed"
	case tightenRank:
		return fmt.Sprintf("%s is locked; only stricter values are allowed (strictest first: %s)", key, strings.Join(ks.enum, ", "))
	case tightenTrue:
		return key + " is locked; it may only be set to true"
	case tightenFalse:
		return key + " is locked; it may only be set to false"
	case tightenSubset:
		return key + " is locked; lower layers may only remove entries, not add them"
	case tightenSuperset:
		return key + " is locked; lower layers may only add entries, not remove them"
	case tightenLower:
		return key + " is locked; lower layers may only lower the limit"
	case tightenHigher:
		return key + " is locked; lower layers may only raise it"
	}
	return ""
}
