//go:build linux

package launcher

import (
	"os"
	"strconv"
	"strings"
)

// unsetLoginUID is /proc/self/loginuid of a task that never logged in.
const unsetLoginUID = "4294967295"

// newAuditSession gives the launcher, and so every process of the session,
// a kernel audit session id of its own: writing /proc/self/loginuid
// allocates one. The login uid is kept when it is set (the user who logged
// in stays the actor) and becomes the session's user when it is not. It is
// how a seccomp refusal is attributed after its process exited (the
// AUDIT_SECCOMP record carries ses= and nothing else that outlives the
// process). Failure is not fatal: a kernel without audit, or one with
// loginuid immutable, only loses that attribution.
func newAuditSession(uid int) {
	// Per thread: the one that execs passes it on.
	b, err := os.ReadFile("/proc/thread-self/loginuid")
	if err != nil {
		return
	}
	login := strings.TrimSpace(string(b))
	if login == unsetLoginUID {
		login = strconv.Itoa(uid)
	}
	_ = os.WriteFile("/proc/thread-self/loginuid", []byte(login), 0)
}
