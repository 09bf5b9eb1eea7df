//go:build linux

package testutil

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// LSMVerdict is what a test finds out about BPF-LSM without the code under
// test: the LSM list read directly, and a hand-assembled BPF_LSM_MAC
// program loaded and attached directly.
type LSMVerdict struct {
	InList    bool
	LoadErr   error // error of loading the hand-assembled program
	AttachErr error
}

// Usable reports whether a BPF-LSM program loads and attaches here.
func (v LSMVerdict) Usable() bool { return v.InList && v.LoadErr == nil && v.AttachErr == nil }

// IndependentLSMProbe probes BPF-LSM as root (skipping, or failing in the
// VM, otherwise).
func IndependentLSMProbe(tb testing.TB) LSMVerdict {
	tb.Helper()
	RequireRoot(tb)
	data, err := os.ReadFile("/sys/kernel/security/lsm")
	if errors.Is(err, os.ErrNotExist) {
		if err := unix.Mount("securityfs", "/sys/kernel/security", "securityfs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			tb.Fatalf("mount securityfs for the LSM list: %v", err)
		}
		data, err = os.ReadFile("/sys/kernel/security/lsm")
	}
	if err != nil {
		tb.Fatalf("read LSM list: %v", err)
	}
	var v LSMVerdict
	v.InList = slices.Contains(strings.Split(strings.TrimSpace(string(data)), ","), "bpf")

	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:       ebpf.LSM,
		AttachType: ebpf.AttachLSMMac,
		AttachTo:   "file_open",
		License:    "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	})
	if err != nil {
		v.LoadErr = err
		return v
	}
	defer prog.Close()
	l, err := link.AttachLSM(link.LSMOptions{Program: prog})
	if err != nil {
		v.AttachErr = err
		return v
	}
	l.Close()
	tb.Logf("independent probe: bpf in LSM list=%v, hand-made LSM program loads and attaches", v.InList)
	return v
}
