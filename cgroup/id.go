package cgroup

import (
	"fmt"
	"strings"
)

// DefaultParent is the group, relative to the cgroup2 mount, under which
// session groups are created.
const DefaultParent = "oxsupervise"

const maxSessionIDLen = 64

// ValidateSessionID rejects ids that could escape the session parent or
// collide with cgroupfs control files: an id is 1-64 characters of
// [A-Za-z0-9._-] and starts with a letter or digit (so never "." or "..",
// never "cgroup.*"-like hidden names, never a path separator).
func ValidateSessionID(id string) error {
	if id == "" {
		return fmt.Errorf("session id is empty")
	}
	if len(id) > maxSessionIDLen {
		return fmt.Errorf("session id %q: longer than %d characters", id, maxSessionIDLen)
	}
	if !isAlnum(id[0]) {
		return fmt.Errorf("session id %q: must start with a letter or digit", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("session id %q: character %q not allowed (use A-Z a-z 0-9 . _ -)", id, c)
		}
	}
	if strings.HasPrefix(id, "cgroup.") {
		return fmt.Errorf("session id %q: the cgroup. prefix is reserved by the kernel", id)
	}
	return nil
}

// validateParent checks a parent group path relative to the cgroup2 mount.
func validateParent(parent string) error {
	if parent == "" {
		return fmt.Errorf("session parent group is empty")
	}
	if strings.HasPrefix(parent, "/") {
		return fmt.Errorf("session parent %q: must be relative to the cgroup2 mount", parent)
	}
	for _, part := range strings.Split(parent, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("session parent %q: empty, '.' or '..' component", parent)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
