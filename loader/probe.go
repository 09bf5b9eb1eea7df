package loader

import "errors"

// ErrUnsupportedOS is returned by every probe and loader entry point on
// operating systems without BPF.
var ErrUnsupportedOS = errors.New("BPF is not supported on this OS")

// ErrBPFNotInLSMList means the kernel runs without the bpf LSM, so BPF_LSM_MAC
// programs may load but never run. The fix is a kernel command line with
// lsm=...,bpf.
var ErrBPFNotInLSMList = errors.New(`"bpf" is not in the active LSM list (boot with lsm=...,bpf)`)

// ProbeBPFLSM reports whether BPF-LSM enforcement is usable: "bpf" must be in
// the active LSM list AND a probe BPF_LSM_MAC program must load and attach.
// It returns nil when usable, otherwise an error wrapping the errno (e.g.
// EPERM) and saying which step failed.
func ProbeBPFLSM() error { return probeBPFLSM() }

// ProbeCgroupSockAddr reports whether a cgroup connect4 program can be loaded
// and attached to the given cgroup v2 directory (then detaches it).
func ProbeCgroupSockAddr(cgroupDir string) error { return probeCgroupSockAddr(cgroupDir) }

// ProbeBTF reports whether kernel BTF (/sys/kernel/btf/vmlinux) is usable.
func ProbeBTF() error { return probeBTF() }

// ActiveLSMs returns the kernel's active LSMs in their stacking order, from
// /sys/kernel/security/lsm (mounting securityfs there if it is not mounted).
func ActiveLSMs() ([]string, error) { return activeLSMs() }
