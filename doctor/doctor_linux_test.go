//go:build linux

package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// The test below re-derives every finding with its own minimal code and
// compares: it never states what this machine "should" have.

func ownLandlockABI() (int, syscall.Errno) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	return int(abi), errno
}

// ownCgroupMounts: the cgroup2 mount of the hierarchy root, and whether any
// v1 hierarchy is mounted too.
func ownCgroupMounts(t *testing.T) (cgroup2 string, v1 bool) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		_, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(line)
		if !ok || len(f) < 5 {
			continue
		}
		switch strings.Fields(post)[0] {
		case "cgroup2":
			if f[3] == "/" && cgroup2 == "" {
				cgroup2 = f[4]
			}
		case "cgroup":
			v1 = true
		}
	}
	return cgroup2, v1
}

// ownLSMProbe loads and attaches a BPF_LSM_MAC program on file_open built
// from instructions here, not from the loader's object.
func ownLSMProbe() error {
	if err := rlimit.RemoveMemlock(); err != nil {
		return err
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.LSM,
		AttachType:   ebpf.AttachLSMMac,
		AttachTo:     "file_open",
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return err
	}
	defer prog.Close()
	l, err := link.AttachLSM(link.LSMOptions{Program: prog})
	if err != nil {
		return err
	}
	return l.Close()
}

// ownSockAddrProbe attaches an allow-all connect4 program to a group of its
// own, and says whether that group has cgroup.kill and cgroup.freeze.
func ownSockAddrProbe(mount string) (kill, freeze bool, err error) {
	dir := filepath.Join(mount, fmt.Sprintf("oxsupervise-doctor-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return false, false, err
	}
	defer unix.Rmdir(dir)
	kill, freeze = exists(filepath.Join(dir, "cgroup.kill")), exists(filepath.Join(dir, "cgroup.freeze"))
	return kill, freeze, attachOwnConnect4(dir)
}

func attachOwnConnect4(dir string) error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.CGroupSockAddr,
		AttachType:   ebpf.AttachCGroupInet4Connect,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()},
	})
	if err != nil {
		return err
	}
	defer prog.Close()
	l, err := link.AttachCgroup(link.CgroupOptions{Path: dir, Attach: ebpf.AttachCGroupInet4Connect, Program: prog})
	if err != nil {
		return err
	}
	return l.Close()
}

func errnoOf(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return ""
}

func TestRunMatchesIndependentProbes(t *testing.T) {
	testutil.RequireRoot(t)
	r := Run(context.Background())
	t.Logf("verdict: %+v", r.Verdict)

	if !r.Root {
		t.Error("Report.Root = false while running as root")
	}

	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	if want := unix.ByteSliceToString(u.Release[:]); r.Kernel.Release != want {
		t.Errorf("kernel release %q, uname says %q", r.Kernel.Release, want)
	}

	// RCU knobs: what the files say, read here without package rcu.
	expedited, errE := os.ReadFile("/sys/kernel/rcu_expedited")
	normal, errN := os.ReadFile("/sys/kernel/rcu_normal")
	switch {
	case errE != nil || errN != nil:
		if r.Kernel.RCU != nil || r.Kernel.RCUError == "" {
			t.Errorf("RCU knobs unreadable here (%v, %v), doctor reports %+v (error %q)", errE, errN, r.Kernel.RCU, r.Kernel.RCUError)
		}
	case r.Kernel.RCU == nil:
		t.Errorf("RCU knobs readable (%q, %q), doctor reports none: %s", expedited, normal, r.Kernel.RCUError)
	case r.Kernel.RCU.ExpeditedSet != (strings.TrimSpace(string(expedited)) != "0") || r.Kernel.RCU.NormalSet != (strings.TrimSpace(string(normal)) != "0"):
		t.Errorf("doctor reports RCU %+v, the knobs hold %q and %q", *r.Kernel.RCU, expedited, normal)
	}

	// Run mounted securityfs if it had to, so the file is readable now.
	lsmList, err := os.ReadFile("/sys/kernel/security/lsm")
	if err != nil {
		if r.LSM.Error == "" {
			t.Errorf("LSM list unreadable here (%v) but doctor reports %v without an error", err, r.LSM.Active)
		}
	} else if want := strings.Split(strings.TrimSpace(string(lsmList)), ","); !slices.Equal(r.LSM.Active, want) {
		t.Errorf("active LSMs %v, /sys/kernel/security/lsm says %v", r.LSM.Active, want)
	}

	// BPF-LSM: usable iff bpf is listed and our own program loads and attaches.
	ownErr := ownLSMProbe()
	bpfListed := slices.Contains(r.LSM.Active, "bpf")
	t.Logf("own BPF-LSM probe: %v (bpf listed: %v); doctor: %+v", ownErr, bpfListed, r.BPFLSM)
	switch {
	case bpfListed && ownErr == nil:
		if !r.BPFLSM.OK {
			t.Errorf("own LSM program loads and attaches, doctor says BPF-LSM unusable: %s", r.BPFLSM.Error)
		}
	case !bpfListed:
		if r.BPFLSM.OK || r.BPFLSM.Step != "lsm list" {
			t.Errorf("bpf not in the LSM list, doctor says %+v; want unusable at step \"lsm list\"", r.BPFLSM)
		}
	default:
		if r.BPFLSM.OK {
			t.Errorf("own LSM program fails (%v), doctor says BPF-LSM usable", ownErr)
		}
		if want := errnoOf(ownErr); r.BPFLSM.Errno != want {
			t.Errorf("doctor BPF-LSM errno %q, own probe failed with %q (%v)", r.BPFLSM.Errno, want, ownErr)
		}
		if r.BPFLSM.Step == "" {
			t.Errorf("doctor does not say which BPF-LSM step failed: %+v", r.BPFLSM)
		}
	}
	if testutil.InVM() && !r.BPFLSM.OK {
		t.Errorf("inside the test VM (booted with bpf in lsm=) BPF-LSM must be usable; doctor: %+v", r.BPFLSM)
	}

	abi, errno := ownLandlockABI()
	if errno != 0 {
		if r.Landlock.OK || r.Landlock.Errno != unix.ErrnoName(errno) {
			t.Errorf("landlock: own syscall fails with %v, doctor says %+v", errno, r.Landlock)
		}
	} else if !r.Landlock.OK || r.Landlock.ABI != abi {
		t.Errorf("landlock: own syscall says ABI %d, doctor says %+v", abi, r.Landlock)
	}

	mount, v1 := ownCgroupMounts(t)
	if r.Cgroup.Mount != mount {
		t.Errorf("cgroup2 mount %q, mountinfo says %q", r.Cgroup.Mount, mount)
	}
	wantLayout := map[[2]bool]string{{true, false}: "unified", {true, true}: "hybrid", {false, true}: "legacy", {false, false}: "none"}[[2]bool{mount != "", v1}]
	if r.Cgroup.Layout != wantLayout {
		t.Errorf("cgroup layout %q, mountinfo says %q", r.Cgroup.Layout, wantLayout)
	}
	if mount == "" {
		t.Skip("SKIPPED, NOT PASSED (rest): no cgroup2 mounted, cannot compare controllers and sock_addr")
	}
	controllers, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Fields(string(controllers)); !slices.Equal(r.Cgroup.Controllers, want) {
		t.Errorf("cgroup2 controllers %v, %s/cgroup.controllers says %v", r.Cgroup.Controllers, mount, want)
	}

	ownKill, ownFreeze, ownNet := ownSockAddrProbe(mount)
	if (ownNet == nil) != r.CgroupSockAddr.OK {
		t.Errorf("cgroup sock_addr: own probe %v, doctor %+v", ownNet, r.CgroupSockAddr)
	}
	if probeGroup := filepath.Join(mount, fmt.Sprintf("oxsupervise-doctor-%d", os.Getpid())); exists(probeGroup) {
		t.Errorf("doctor left its probe group %s behind", probeGroup)
	}
	if ownNet == nil {
		// The own probe's group existed, so doctor's one could be created too.
		if r.Cgroup.Kill == nil || r.Cgroup.Freeze == nil {
			t.Errorf("cgroup.kill/freeze not measured: %v %v", r.Cgroup.Kill, r.Cgroup.Freeze)
		} else if *r.Cgroup.Kill != ownKill || *r.Cgroup.Freeze != ownFreeze {
			t.Errorf("cgroup.kill %v freeze %v; own group had kill %v freeze %v", *r.Cgroup.Kill, *r.Cgroup.Freeze, ownKill, ownFreeze)
		}
	}

	_, btfErr := os.Stat("/sys/kernel/btf/vmlinux")
	if (btfErr == nil) != r.BTF.OK {
		t.Errorf("btf: /sys/kernel/btf/vmlinux stat %v, doctor %+v", btfErr, r.BTF)
	}

	// /proc/PID/loginuid exists exactly when the kernel has audit support;
	// the status query then succeeds for root in the initial namespaces.
	_, loginuidErr := os.Stat("/proc/self/loginuid")
	if (loginuidErr == nil) != r.Audit.OK {
		t.Errorf("audit: /proc/self/loginuid stat %v, doctor %+v", loginuidErr, r.Audit.Probe)
	}

	fsOK := (bpfListed && ownErr == nil) || (errno == 0 && abi >= LandlockMinCompleteABI)
	if want := fsOK && ownNet == nil; r.Verdict.OK != want {
		t.Errorf("verdict ok=%v, own probes say %v (fs %v, net %v)", r.Verdict.OK, want, fsOK, ownNet)
	}
}
