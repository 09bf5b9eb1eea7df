package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"strings"
	"syscall"

	"github.com/openoxide/oxsupervise/policy"
)

// NewID returns a fresh session id.
func NewID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return "s-" + hex.EncodeToString(b[:]), nil
}

// ScrubEnv removes variables matching scrub (name globs) unless they match
// passthrough, and sets e.Set's variables (replacing the caller's).
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
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// ExitStatus turns the result of exec.Cmd.Wait into the shell's
// convention, which `run` promises to its callers: the command's own status,
// or 128+N when signal N killed it. ok is false when err says nothing about
// how the command ended (it never started, or waiting failed).
func ExitStatus(err error) (code int, ok bool) {
	if err == nil {
		return 0, true
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	if ws, isWait := ee.Sys().(syscall.WaitStatus); isWait && ws.Signaled() {
		return 128 + int(ws.Signal()), true
	}
	return ee.ExitCode(), true
}
