package session

import (
	"github.com/openoxide/oxsupervise/agenthook"
	"github.com/openoxide/oxsupervise/policy"
)

// sharedTierNote is the warning a session started with an agent's profile
// gives once, on stderr and in its session_start record, when none of the
// agent's settings (managed or the user's, found through the session's
// HOME) has the oxsupervise hook: the agent's commands then run in its own
// session, with its credentials and its API hosts (DESIGN §8). "" when the
// hook is there, or no profile applies.
func sharedTierNote(c *policy.Compiled, env []string) string {
	if c.Agent == nil {
		return ""
	}
	lookup := func(name string) string { return EnvValue(env, name) }
	w, ok := agenthook.SharedTierWarning(c.Agent.Name, agenthook.AllSettings(lookup("HOME"), lookup))
	if !ok {
		return ""
	}
	return w
}
