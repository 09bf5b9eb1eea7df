//go:build linux

package account

import "github.com/openoxide/oxsupervise/internal/companion"

// openGetent opens glibc's getent where glibc installs it, checked as
// every program root runs for oxsupervise is (companion.FindIn: a regular,
// executable file owned by root that no one else may write, executed by
// the descriptor that was checked). Never a PATH search: the caller is
// root, and PATH is its caller's.
func openGetent() (*companion.Program, error) {
	return companion.FindIn("getent", []string{"/usr/bin", "/bin"}, 0)
}
