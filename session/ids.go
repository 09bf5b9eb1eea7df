package session

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

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
// passthrough.
func ScrubEnv(env []string, e policy.Env) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if matchAny(e.Scrub, name) && !matchAny(e.Passthrough, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}
