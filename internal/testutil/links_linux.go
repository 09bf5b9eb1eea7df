//go:build linux

package testutil

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// LinksOf returns the ids of the links attached in the kernel that hold
// program prog, as the kernel lists them (not what this process holds):
// whether a program is attached anywhere, by anyone.
func LinksOf(t testing.TB, prog ebpf.ProgramID) []link.ID {
	t.Helper()
	var out []link.ID
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		if info.Program == prog {
			out = append(out, it.ID)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatalf("list the kernel's links: %v", err)
	}
	return out
}

// ProgramID is the kernel's id of prog, for LinksOf and for telling a
// reopened pin from a reload; a kernel that reports no program ids skips
// the test, loudly.
func ProgramID(t testing.TB, prog *ebpf.Program) ebpf.ProgramID {
	t.Helper()
	info, err := prog.Info()
	if err != nil {
		t.Fatalf("program info: %v", err)
	}
	id, ok := info.ID()
	if !ok {
		t.Skip("SKIPPED, NOT PASSED: this kernel reports no program ids")
	}
	return id
}
