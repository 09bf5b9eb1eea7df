package session

import (
	"path"
	"slices"
	"strings"

	"github.com/openoxide/oxsupervise/policy"
)

// A command's environment is shaped in two steps, both here: UserEnv
// (whose command it is: the caller's environment with the identity of the
// account it runs as) by whoever starts it — the CLI, the daemon for a
// session or for an approved command outside one — and ScrubEnv (what
// the policy keeps from it: DESIGN §2, "Environment and limits") by Run,
// for every session alike.

// SessionEnv tells the command (and tools it runs) which session it is in.
const SessionEnv = "OXSUPERVISE_SESSION"

// EnvUser is the account a command runs as, for the variables that name
// it.
type EnvUser struct {
	Home, Name string
}

// identityEnv are the variables that describe the account a process runs
// as; MAIL names its mail spool. They are replaced (MAIL dropped) when a
// command runs as an account other than its caller's environment says.
var identityEnv = []string{"HOME", "USER", "LOGNAME", "MAIL"}

// UserEnv is the environment of a command started from a caller's env.
// A session marker (SessionEnv) the caller inherited is always dropped: the
// command is either in a new session, whose launcher sets its own, or
// outside every session (the escape hatch), where an inherited one would
// name a session it is not in. With u, the command runs as an account the
// caller's variables may not describe: HOME, USER and LOGNAME are u's and
// MAIL is dropped; with nil u they are kept as the caller has them.
func UserEnv(env []string, u *EnvUser) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == SessionEnv || u != nil && slices.Contains(identityEnv, name) {
			continue
		}
		out = append(out, kv)
	}
	if u == nil {
		return out
	}
	return append(out, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
}

// ScrubEnv removes variables matching scrub (name globs) unless they match
// passthrough.
func ScrubEnv(env []string, e policy.Env) []string {
	out := make([]string, 0, len(env)+len(e.Set))
	set := map[string]bool{}
	for _, kv := range e.Set {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if set[name] || matchAny(e.Scrub, name) && !matchAny(e.Passthrough, name) {
			continue
		}
		out = append(out, kv)
	}
	return append(out, e.Set...)
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if globMatch(g, name) {
			return true
		}
	}
	return false
}

// globMatch is path.Match(pattern, name) with the shapes scrub lists are
// made of (literals and '*': TOKEN, AWS_*, *_SECRET*) matched by string
// search: every variable of a session's environment is matched against
// every glob of the policy, and path.Match's general matcher made that
// half a millisecond of each start (issue 18). Any other pattern, and a
// name with a '/' (which '*' does not match), go to path.Match itself.
func globMatch(pattern, name string) bool {
	if strings.ContainsAny(pattern, `?[\/`) || strings.Contains(name, "/") {
		ok, _ := path.Match(pattern, name)
		return ok
	}
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(name) < len(first)+len(last) || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	// The middle parts in order, each leftmost, between the two ends.
	rest := name[len(first) : len(name)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// EnvValue is name's value in env, the last entry winning as it does for
// the command that gets env; "" when env has none.
func EnvValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if val, ok := strings.CutPrefix(kv, name+"="); ok {
			v = val
		}
	}
	return v
}
