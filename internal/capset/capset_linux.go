// Package capset reads the calling thread's capability sets with
// capget(2): one system call, where /proc/self/status is an open, a read
// of the whole rendered status and a close. Its callers are the BPF-LSM
// probe cache (host), whose key names the supervisor's effective set,
// and the tree scan (internal/treescan), whose workers verify that they
// took the scanning thread's file access exactly.
package capset

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Effective is the calling thread's effective capability set, bit N for
// capability N (the CapEff line of /proc/thread-self/status).
func Effective() (uint64, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, fmt.Errorf("capget: %w", err)
	}
	return uint64(data[1].Effective)<<32 | uint64(data[0].Effective), nil
}
