// Package shquote quotes strings for a POSIX shell: the one place that
// writes the commands oxsupervise's messages tell a user to run.
package shquote

import "strings"

// Quote returns s single-quoted, safe to paste into sh.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
