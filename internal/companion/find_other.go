//go:build !linux

package companion

import (
	"fmt"
	"runtime"
)

// Find: the companions are Linux programs (the launcher builds a mount
// namespace and a Landlock domain; the daemon supervises cgroups).
func Find(name string) (*Program, error) {
	return nil, fmt.Errorf("%w: %s: no companion programs on %s", ErrNotFound, name, runtime.GOOS)
}
