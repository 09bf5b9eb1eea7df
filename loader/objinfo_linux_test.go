//go:build linux

package loader

import (
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// mapID and progInfo say what cilium/ebpf's Info says, read from the
// kernel by another way (fdinfo and BTF there, one bpf(2) call here).
func TestObjInfoIsCiliumsInfo(t *testing.T) {
	maps := make([]*ebpf.Map, 2)
	for i := range maps {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
		if err != nil {
			t.Skipf("SKIPPED, NOT PASSED: cannot create a BPF map here: %v", err)
		}
		defer m.Close()
		maps[i] = m
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.RawTracepoint, License: "GPL",
		Instructions: asm.Instructions{
			// Both maps referenced, neither used: the program's map ids.
			asm.LoadMapPtr(asm.R1, maps[0].FD()), asm.LoadMapPtr(asm.R1, maps[1].FD()),
			asm.Mov.Imm(asm.R0, 0), asm.Return(),
		},
	})
	if err != nil {
		t.Fatalf("load a program using the maps: %v", err)
	}
	defer prog.Close()
	var want []ebpf.MapID
	for _, m := range maps {
		info, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		got, err := mapID(m)
		if err != nil || got != id {
			t.Errorf("mapID = %d (%v), Info says %d", got, err, id)
		}
		want = append(want, id)
	}
	pi, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := pi.ID()
	used, _ := pi.MapIDs()
	got, err := progInfo(prog)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || ebpf.ProgramType(got.Type) != pi.Type || !slices.Equal(got.Maps, used) {
		t.Errorf("progInfo = %+v, Info says id %d, type %s, maps %v", got, id, pi.Type, used)
	}
	slices.Sort(used)
	slices.Sort(want)
	if !slices.Equal(used, want) {
		t.Errorf("the program uses maps %v, want %v", used, want)
	}
}
