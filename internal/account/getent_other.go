//go:build !linux

package account

import (
	"errors"

	"github.com/openoxide/oxsupervise/internal/companion"
)

// openGetent: glibc's getent is Linux's; elsewhere os/user's answer is
// final.
func openGetent() (*companion.Program, error) {
	return nil, errors.New("no glibc getent on this system")
}
