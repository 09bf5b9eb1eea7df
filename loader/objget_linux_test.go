//go:build linux

package loader

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// loadPinnedProgram opens what ebpf.LoadPinnedProgram opens (the very
// program: same kernel id and type) and refuses what it refuses: a pin of
// a map, a path with nothing pinned.
func TestLoadPinnedProgramIsCiliums(t *testing.T) {
	testutil.RequireRoot(t)
	dir := filepath.Join(BPFFSMount, "oxs-objget-test-"+strings.ReplaceAll(t.Name(), "/", "-"))
	if err := EnsurePinDir(dir); err != nil {
		testutil.SkipUnlessVM(t, "no bpffs for pins: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.RawTracepoint, License: "GPL",
		Instructions: asm.Instructions{asm.LoadMapPtr(asm.R1, m.FD()), asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Fatalf("load a program: %v", err)
	}
	defer prog.Close()
	progPin, mapPin := filepath.Join(dir, "prog"), filepath.Join(dir, "map")
	if err := prog.Pin(progPin); err != nil {
		t.Fatal(err)
	}
	if err := m.Pin(mapPin); err != nil {
		t.Fatal(err)
	}
	want, err := progInfo(prog)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		wantErr    func(error) bool
	}{
		{"program", progPin, nil},
		{"map", mapPin, func(err error) bool { return strings.Contains(err.Error(), "is not a program (anon_inode:bpf-map)") }},
		{"nothing pinned", filepath.Join(dir, "none"), func(err error) bool { return errors.Is(err, unix.ENOENT) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadPinnedProgram(tc.path)
			cilium, cerr := ebpf.LoadPinnedProgram(tc.path, nil)
			if cerr == nil {
				defer cilium.Close()
			}
			if tc.wantErr != nil {
				if err == nil {
					got.Close()
					t.Fatalf("loadPinnedProgram(%s) opened a program", tc.path)
				}
				if !tc.wantErr(err) {
					t.Fatalf("loadPinnedProgram(%s): %v, not the refusal wanted", tc.path, err)
				}
				if cerr == nil {
					t.Fatalf("ebpf.LoadPinnedProgram(%s) opened what loadPinnedProgram refused: %v", tc.path, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadPinnedProgram(%s): %v", tc.path, err)
			}
			defer got.Close()
			if cerr != nil {
				t.Fatalf("ebpf.LoadPinnedProgram(%s): %v", tc.path, cerr)
			}
			for _, p := range []*ebpf.Program{got, cilium} {
				info, err := progInfo(p)
				if err != nil {
					t.Fatal(err)
				}
				if info.ID != want.ID || info.Type != want.Type {
					t.Fatalf("opened program id %d type %d, pinned id %d type %d", info.ID, info.Type, want.ID, want.Type)
				}
			}
			if got.Type() != cilium.Type() {
				t.Fatalf("type %v, ebpf.LoadPinnedProgram says %v", got.Type(), cilium.Type())
			}
			// The descriptor is closed on exec, as cilium's are.
			flags, err := unix.FcntlInt(uintptr(got.FD()), unix.F_GETFD, 0)
			if err != nil || flags&unix.FD_CLOEXEC == 0 {
				t.Fatalf("descriptor flags %#x (%v), want FD_CLOEXEC", flags, err)
			}
		})
	}
}
