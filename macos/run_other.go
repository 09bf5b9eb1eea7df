//go:build !darwin

package macos

import (
	"context"
	"errors"

	"github.com/openoxide/oxsupervise/policy"
)

// ErrNotDarwin is returned by Run on every OS but macOS.
var ErrNotDarwin = errors.New("the Seatbelt backend runs only on macOS")

// Run is only available on macOS.
func Run(ctx context.Context, c *policy.Compiled, argv []string, cfg RunConfig) (int, error) {
	return -1, ErrNotDarwin
}
