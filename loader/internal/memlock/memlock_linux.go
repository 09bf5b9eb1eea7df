//go:build linux

package memlock

import "golang.org/x/sys/unix"

// Raise lifts RLIMIT_MEMLOCK as far as this process may before BPF
// objects are created: kernels before 5.11 charge their memory to it,
// later ones to the memory cgroup, where the limit changes nothing. Without
// CAP_SYS_RESOURCE only the soft limit can rise, to the hard one; where
// that is too low on an old kernel, creating the object fails with EPERM
// and says so.
//
// cilium/ebpf's rlimit package does this too, but it finds out which
// accounting the kernel uses by creating a map in its init function, so
// every process of a binary that links it calls bpf(2) at start. Inside a
// session that call is refused and audited as a self-protection refusal:
// an agent running `oxsupervise` there would look like it reached for
// bpf(2). Setting the limit needs no probe.
func Raise() {
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &cur); err != nil || cur.Cur == unix.RLIM_INFINITY {
		return
	}
	if unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}) == nil {
		return
	}
	if cur.Cur < cur.Max {
		unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: cur.Max, Max: cur.Max})
	}
}
