//go:build !windows

package windows

import (
	"context"
	"errors"

	"github.com/openoxide/oxsupervise/policy"
)

// ErrNotWindows is returned by Run on every OS but Windows.
var ErrNotWindows = errors.New("the Job object / restricted token backend runs only on Windows")

// Run is only available on Windows.
func Run(ctx context.Context, c *policy.Compiled, argv []string, cfg RunConfig) (int, error) {
	return -1, ErrNotWindows
}
