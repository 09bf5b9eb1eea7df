package main

import (
	"os"

	"github.com/openoxide/oxsupervise/session"
)

// hookInSession reports whether the agent running the hook is inside a
// session (the variable `run` sets for the command and everything it
// starts). It only chooses whether to nest: a forged value makes the
// command run in the agent's own session, which confines it anyway.
func hookInSession() bool { return os.Getenv(session.SessionEnv) != "" }
