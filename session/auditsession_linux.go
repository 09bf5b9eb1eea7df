//go:build linux

package session

import (
	"os"
	"strconv"
	"strings"
)

// readAuditSession reads a /proc/PID/sessionid file: the kernel audit
// session the launcher opened for the session (package launcher).
func readAuditSession(path string) (uint32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	return uint32(v), err
}
