//go:build !linux

package doctor

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
)

func errnoName(e syscall.Errno) string { return fmt.Sprintf("errno %d", int(e)) }

// probeHost on other systems: every check here is a Linux kernel feature.
func probeHost(ctx context.Context, r *Report) {
	unsupported := Probe{Error: fmt.Sprintf("not supported on this OS (%s): doctor checks Linux kernel features", runtime.GOOS)}
	r.Kernel.Error = unsupported.Error
	r.LSM.Error = unsupported.Error
	r.BPFLSM = unsupported
	r.Landlock.Probe = unsupported
	r.Cgroup.Probe = unsupported
	r.Cgroup.Layout = "none"
	r.BTF = unsupported
	r.CgroupSockAddr = unsupported
	r.Audit.Probe = unsupported
}

// probeLSM on other systems: there is no LSM list to read.
func probeLSM(r *Report) {
	r.LSM.Error = fmt.Sprintf("not supported on this OS (%s)", runtime.GOOS)
}
