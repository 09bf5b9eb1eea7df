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
