//go:build linux

package loader

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/loader/internal/memlock"
)

const (
	securityfsDir = "/sys/kernel/security"
	lsmListFile   = securityfsDir + "/lsm"
)

func probeBPFLSM() error {
	lsms, err := activeLSMs()
	if err != nil {
		return fmt.Errorf("bpf-lsm probe: read active LSMs: %w", err)
	}
	if !slices.Contains(lsms, "bpf") {
		return fmt.Errorf("bpf-lsm probe: active LSMs are %q: %w", strings.Join(lsms, ","), ErrBPFNotInLSMList)
	}

	spec, err := loadProbe()
	if err != nil {
		return fmt.Errorf("bpf-lsm probe: parse embedded object: %w", err)
	}
	prog, err := newProgram(spec, probeProgProbeLsmFileOpen)
	if errors.Is(err, unix.EPERM) {
		// cilium/ebpf suggests RLIMIT_MEMLOCK on EPERM; newProgram has
		// already lifted it as far as it may (and taken the hint out), so
		// point at the usual suspects.
		return fmt.Errorf("bpf-lsm probe: load BPF_LSM_MAC program on file_open: refused with EPERM "+
			"(needs CAP_BPF and CAP_MAC_ADMIN as root; some kernels or hypervisor sandboxes forbid LSM programs; before Linux 5.11 also a high enough RLIMIT_MEMLOCK): %w", err)
	}
	if err != nil {
		return fmt.Errorf("bpf-lsm probe: load BPF_LSM_MAC program on file_open: %w", err)
	}
	defer prog.Close()

	l, err := link.AttachLSM(link.LSMOptions{Program: prog})
	if err != nil {
		return fmt.Errorf("bpf-lsm probe: attach BPF_LSM_MAC program to file_open: %w", err)
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("bpf-lsm probe: detach file_open probe: %w", err)
	}
	return nil
}

func probeCgroupSockAddr(cgroupDir string) error {
	spec, err := loadProbe()
	if err != nil {
		return fmt.Errorf("cgroup sock_addr probe: parse embedded object: %w", err)
	}
	prog, err := newProgram(spec, probeProgProbeConnect4)
	if err != nil {
		return fmt.Errorf("cgroup sock_addr probe: load cgroup/connect4 program: %w", err)
	}
	defer prog.Close()

	l, err := link.AttachCgroup(link.CgroupOptions{
		Path:    cgroupDir,
		Attach:  ebpf.AttachCGroupInet4Connect,
		Program: prog,
	})
	if err != nil {
		return fmt.Errorf("cgroup sock_addr probe: attach cgroup/connect4 to %s: %w", cgroupDir, err)
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("cgroup sock_addr probe: detach cgroup/connect4 from %s: %w", cgroupDir, err)
	}
	return nil
}

func probeBTF() error {
	if _, err := btf.LoadKernelSpec(); err != nil {
		return fmt.Errorf("btf probe: load kernel BTF: %w", err)
	}
	return nil
}

// newProgram loads one program of spec into the kernel, with the verifier
// log attached to the error when the kernel refuses it.
func newProgram(spec *ebpf.CollectionSpec, name string) (*ebpf.Program, error) {
	progSpec, ok := spec.Programs[name]
	if !ok {
		return nil, fmt.Errorf("program %s missing from embedded object", name)
	}
	memlock.Raise()
	prog, err := ebpf.NewProgram(progSpec)
	return prog, memlock.WithoutHint(err)
}

func activeLSMs() ([]string, error) {
	data, err := os.ReadFile(lsmListFile)
	if errors.Is(err, os.ErrNotExist) {
		if mountErr := mountSecurityfs(); mountErr != nil {
			return nil, fmt.Errorf("%s missing and securityfs cannot be mounted: %w", lsmListFile, mountErr)
		}
		data, err = os.ReadFile(lsmListFile)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", lsmListFile, err)
	}
	var lsms []string
	for _, name := range strings.Split(strings.TrimSpace(string(data)), ",") {
		if name != "" {
			lsms = append(lsms, name)
		}
	}
	return lsms, nil
}

// mountSecurityfs mounts securityfs on /sys/kernel/security unless
// something is already mounted there; a mounted securityfs without an lsm
// file means a kernel without LSM stacking support, reported by the caller.
func mountSecurityfs() error {
	mounted, err := isMountPoint(securityfsDir)
	if err != nil {
		return err
	}
	if mounted {
		return fmt.Errorf("%s is mounted but has no lsm file", securityfsDir)
	}
	if err := unix.Mount("securityfs", securityfsDir, "securityfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount securityfs on %s: %w", securityfsDir, err)
	}
	return nil
}

// isMountPoint reports whether dir is a mount point in this mount
// namespace, from /proc/self/mountinfo (field 5 is the mount point).
func isMountPoint(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) > 4 && fields[4] == dir {
			return true, nil
		}
	}
	if err := scanner.Err(); err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	return false, nil
}
