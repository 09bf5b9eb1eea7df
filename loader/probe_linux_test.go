//go:build linux

package loader_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
)

// lsmVerdict is what the tests independently find out about BPF-LSM
// (testutil.IndependentLSMProbe).
type lsmVerdict struct {
	inList    bool
	loadErr   error
	attachErr error
}

func (v lsmVerdict) usable() bool { return v.inList && v.loadErr == nil && v.attachErr == nil }

func independentLSMProbe(t *testing.T) lsmVerdict {
	t.Helper()
	v := testutil.IndependentLSMProbe(t)
	return lsmVerdict{inList: v.InList, loadErr: v.LoadErr, attachErr: v.AttachErr}
}

// errnoOf digs the errno out of an error chain, 0 when there is none.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

func TestProbeBPFLSM(t *testing.T) {
	want := independentLSMProbe(t)
	got := loader.ProbeBPFLSM()
	t.Logf("ProbeBPFLSM() = %v", got)

	if testutil.InVM() && !want.usable() {
		t.Fatalf("the test VM must support BPF-LSM; independent probe: in list=%v load=%v attach=%v", want.inList, want.loadErr, want.attachErr)
	}
	switch {
	case want.usable():
		if got != nil {
			t.Fatalf("ProbeBPFLSM() = %v, but an independent BPF_LSM_MAC program loads and attaches", got)
		}
	case !want.inList:
		if !errors.Is(got, loader.ErrBPFNotInLSMList) {
			t.Fatalf("ProbeBPFLSM() = %v, want ErrBPFNotInLSMList: bpf is not in the LSM list", got)
		}
	case want.loadErr != nil:
		wantErrno := errnoOf(want.loadErr)
		if wantErrno == 0 {
			t.Fatalf("independent load failed without errno: %v", want.loadErr)
		}
		if !errors.Is(got, wantErrno) {
			t.Fatalf("ProbeBPFLSM() = %v, want an error wrapping %s (%d) like the independent load: %v", got, unix.ErrnoName(wantErrno), wantErrno, want.loadErr)
		}
		if !strings.Contains(got.Error(), "load") {
			t.Errorf("ProbeBPFLSM() = %q does not name the failing step (load)", got)
		}
	case want.attachErr != nil:
		wantErrno := errnoOf(want.attachErr)
		if !errors.Is(got, wantErrno) || !strings.Contains(got.Error(), "attach") {
			t.Fatalf("ProbeBPFLSM() = %v, want an attach error wrapping %v like the independent attach: %v", got, wantErrno, want.attachErr)
		}
	}
}

func TestProbeBTF(t *testing.T) {
	// Independent check: the kernel exports its BTF here when CONFIG_DEBUG_INFO_BTF=y.
	_, statErr := os.Stat("/sys/kernel/btf/vmlinux")
	got := loader.ProbeBTF()
	if statErr == nil && got != nil {
		t.Fatalf("ProbeBTF() = %v, but /sys/kernel/btf/vmlinux exists", got)
	}
	if statErr != nil && got == nil {
		t.Fatalf("ProbeBTF() = nil, but /sys/kernel/btf/vmlinux is missing: %v", statErr)
	}
}

func TestProbeCgroupSockAddr(t *testing.T) {
	cg := testutil.NewCgroup(t)

	// Independent check: a hand-assembled allow-all connect4 program.
	var wantErr error
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:       ebpf.CGroupSockAddr,
		AttachType: ebpf.AttachCGroupInet4Connect,
		License:    "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 1),
			asm.Return(),
		},
	})
	if err == nil {
		l, attachErr := link.AttachCgroup(link.CgroupOptions{Path: cg.Dir, Attach: ebpf.AttachCGroupInet4Connect, Program: prog})
		if attachErr == nil {
			l.Close()
		}
		wantErr = attachErr
		prog.Close()
	} else {
		wantErr = err
	}

	tests := []struct {
		name    string
		dir     string
		wantErr bool
	}{
		{"test cgroup", cg.Dir, wantErr != nil},
		{"missing directory", cg.Dir + "/does-not-exist", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := loader.ProbeCgroupSockAddr(tt.dir)
			t.Logf("ProbeCgroupSockAddr(%s) = %v (independent: %v)", tt.dir, got, wantErr)
			if (got != nil) != tt.wantErr {
				t.Fatalf("ProbeCgroupSockAddr(%s) = %v, want error: %v", tt.dir, got, tt.wantErr)
			}
			if got != nil && tt.dir != cg.Dir && !strings.Contains(got.Error(), tt.dir) {
				t.Errorf("error %q does not name the directory %s", got, tt.dir)
			}
		})
	}
	if testutil.InVM() && wantErr != nil {
		t.Fatalf("cgroup sock_addr programs must work in the test VM: %v", wantErr)
	}
}

func TestActiveLSMs(t *testing.T) {
	testutil.RequireRoot(t)
	lsms, err := loader.ActiveLSMs()
	if err != nil {
		t.Fatalf("ActiveLSMs() = %v", err)
	}
	data, err := os.ReadFile("/sys/kernel/security/lsm")
	if err != nil {
		t.Fatalf("read LSM list after ActiveLSMs mounted securityfs: %v", err)
	}
	if want := strings.TrimSpace(string(data)); strings.Join(lsms, ",") != want {
		t.Fatalf("ActiveLSMs() = %q, /sys/kernel/security/lsm says %q", lsms, want)
	}
	if slices.Contains(lsms, "") {
		t.Fatalf("ActiveLSMs() contains an empty name: %q", lsms)
	}
}
