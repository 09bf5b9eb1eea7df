//go:build linux

package fsguard_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit/bpfring"
	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
)

// requireBPFLSM skips (fails in the VM) unless an independent, hand-made
// BPF_LSM_MAC program loads and attaches on this kernel.
func requireBPFLSM(t testing.TB) {
	t.Helper()
	testutil.RequireRoot(t)
	data, err := os.ReadFile("/sys/kernel/security/lsm")
	if errors.Is(err, os.ErrNotExist) {
		if err := unix.Mount("securityfs", "/sys/kernel/security", "securityfs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			t.Fatalf("mount securityfs for the LSM list: %v", err)
		}
		data, err = os.ReadFile("/sys/kernel/security/lsm")
	}
	if err != nil {
		t.Fatalf("read LSM list: %v", err)
	}
	if !slices.Contains(strings.Split(strings.TrimSpace(string(data)), ","), "bpf") {
		testutil.SkipUnlessVM(t, "bpf is not in the active LSM list %q", strings.TrimSpace(string(data)))
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.LSM, AttachType: ebpf.AttachLSMMac, AttachTo: "file_open", License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		testutil.SkipUnlessVM(t, "BPF-LSM programs do not load on this kernel: %v", err)
	}
	defer prog.Close()
	l, err := link.AttachLSM(link.LSMOptions{Program: prog})
	if err != nil {
		testutil.SkipUnlessVM(t, "BPF-LSM programs do not attach on this kernel: %v", err)
	}
	l.Close()
}

// shared is the one Guard all tests use: loading runs the verifier over
// every program, which takes seconds under qemu TCG. TestMain closes it.
var shared struct {
	once   sync.Once
	ring   *bpfring.Ring
	guard  *fsguard.Guard
	err    error
	events chan fsguard.Event
	lost   atomic.Uint64
}

func loadGuard(t testing.TB) *fsguard.Guard {
	t.Helper()
	requireBPFLSM(t)
	shared.once.Do(func() {
		shared.ring, shared.err = bpfring.Open(bpfring.Options{})
		if shared.err != nil {
			return
		}
		shared.guard, shared.err = fsguard.Load(shared.ring.Maps())
		if shared.err != nil {
			shared.ring.Close()
			shared.ring = nil
			return
		}
		shared.events = make(chan fsguard.Event, 4096)
		_, shared.err = shared.ring.Subscribe(loader.SourceFS, bpfring.Funcs{
			OnRecord: func(_ bpfring.Header, raw []byte) {
				ev, err := shared.guard.Decode(raw)
				if err != nil {
					panic(fmt.Sprintf("decode a filesystem event: %v", err))
				}
				shared.events <- ev
			},
			OnLost: func(n uint64) { shared.lost.Add(n) },
		})
	})
	if shared.err != nil {
		t.Fatalf("fsguard.Load() = %v", shared.err)
	}
	return shared.guard
}

func closeSharedGuard() error {
	if shared.guard == nil {
		return nil
	}
	err := shared.guard.Close()
	return errors.Join(err, shared.ring.Close())
}

func TestLoadAttachesEveryHook(t *testing.T) {
	g := loadGuard(t)
	want := []string{"file_open", "path_truncate", "path_unlink", "path_rmdir", "path_mkdir", "path_mknod",
		"path_symlink", "path_link", "path_rename", "path_chmod", "path_chown", "inode_setattr",
		"inode_setxattr", "inode_removexattr", "bpf", "ptrace_access_check", "task_kill", "file_ioctl", "file_receive",
		"sb_mount", "move_mount", "sb_umount", "sb_pivotroot", "mmap_file", "file_mprotect", "unix_stream_connect",
		"unix_may_send", "kernel_module_request", "kernel_read_file", "kernel_load_data", "socket_create", "task_alloc",
		// bpf/unix.c's abstract peers, a second program on each AF_UNIX hook.
		"unix_stream_connect", "unix_may_send"}
	got := g.Hooks()
	// file_truncate exists from 6.2: attached exactly when the kernel's
	// BTF has the hook (independent check: the BTF itself).
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatalf("kernel BTF: %v", err)
	}
	var fn *btf.Func
	if kernel.TypeByName("bpf_lsm_file_truncate", &fn) == nil {
		want = append(want, "file_truncate")
	} else if _, ok := g.SkippedHooks()["file_truncate"]; !ok {
		t.Errorf("kernel lacks file_truncate but SkippedHooks() = %v does not say so", g.SkippedHooks())
	}
	for _, h := range want {
		if !slices.Contains(got, h) {
			t.Errorf("hook %s not attached; attached: %v", h, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("attached %d hooks %v, want %d", len(got), got, len(want))
	}
	t.Logf("attached: %v; skipped: %v", got, g.SkippedHooks())
}
