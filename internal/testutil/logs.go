package testutil

import "strings"

// LineHasAll reports whether one line of log holds every part: a log
// assertion that two facts were said together, not on unrelated lines.
func LineHasAll(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
