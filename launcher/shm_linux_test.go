//go:build linux

package launcher

import (
	"strings"
	"testing"
)

// TestPrivateShmNeedsItsTmpfs: a plan with a private /dev/shm but no
// tmpfs handed over fails closed (the host's /dev/shm is not left in
// place of it).
func TestPrivateShmNeedsItsTmpfs(t *testing.T) {
	err := mountPrivateShm(0)
	if err == nil || !strings.Contains(err.Error(), "no tmpfs given") {
		t.Fatalf("mountPrivateShm without a tmpfs: %v, want the missing tmpfs named", err)
	}
}
