//go:build linux

package loader_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
)

func TestEnsurePinDirRefuses(t *testing.T) {
	plain := t.TempDir()
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"relative", "oxsupervise", "not an absolute path"},
		{"plain directory", filepath.Join(plain, "pins"), "not on a bpffs mount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := loader.EnsurePinDir(tc.dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("EnsurePinDir(%q) = %v, want an error saying %q", tc.dir, err, tc.want)
			}
			if _, err := os.Stat(tc.dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("refused pin directory %s was created (%v)", tc.dir, err)
			}
		})
	}
}

// A link pinned as a generation stays attached after every descriptor of
// it is closed (as after kill -9 of the process that loaded it), its
// session map stays readable, and removing the generation detaches it.
func TestPinnedGenerationOutlivesDescriptors(t *testing.T) {
	testutil.RequireRoot(t)
	cg := testutil.NewCgroup(t)
	dir := filepath.Join(loader.BPFFSMount, "oxs-loader-test-"+filepath.Base(cg.Dir))
	if err := loader.EnsurePinDir(dir); err != nil {
		testutil.SkipUnlessVM(t, "no bpffs for pins: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Independent of mountinfo: the directory must be on bpffs.
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil || sfs.Type != unix.BPF_FS_MAGIC {
		t.Fatalf("pin directory %s: statfs type %#x (%v), want bpffs", dir, sfs.Type, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("pin directory mode %v (%v), want 0700", fi.Mode(), err)
	}

	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "oxs_sessions", Type: ebpf.Hash, KeySize: 8, ValueSize: 4, MaxEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Put(cg.ID, uint32(1)); err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "oxs_allow", Type: ebpf.CGroupSKB, AttachType: ebpf.AttachCGroupInetEgress,
		License: "GPL", Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cg.Dir, Attach: ebpf.AttachCGroupInetEgress, Program: prog})
	if err != nil {
		testutil.SkipUnlessVM(t, "cgroup skb link does not attach here: %v", err)
	}
	info, err := l.Info()
	if err != nil {
		t.Fatal(err)
	}
	objs := loader.Objects{Links: map[string]link.Link{"oxs_allow": l}, Maps: map[string]*ebpf.Map{"oxs_sessions": m}}

	set := loader.PinSet{Dir: filepath.Join(dir, "net")}
	gen, err := set.Pin(objs)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	prog.Close()
	m.Close()

	if names, err := gen.Links(); err != nil || !slices.Equal(names, []string{"oxs_allow"}) {
		t.Fatalf("pinned links %v (%v), want [oxs_allow]", names, err)
	}
	attached, err := link.QueryPrograms(link.QueryOptions{Target: mustOpen(t, cg.Dir), Attach: ebpf.AttachCGroupInetEgress})
	if err != nil {
		t.Fatal(err)
	}
	if len(attached.Programs) != 1 || attached.Programs[0].ID != info.Program {
		t.Fatalf("programs on %s after every descriptor closed: %+v, want program %d", cg.Dir, attached.Programs, info.Program)
	}
	if keys, err := gen.SessionKeys("oxs_sessions"); err != nil || !slices.Equal(keys, []uint64{cg.ID}) {
		t.Fatalf("pinned session keys %v (%v), want [%d]", keys, err, cg.ID)
	}
	next, err := set.Pin(loader.Objects{})
	if err != nil || next.N != gen.N+1 {
		t.Fatalf("second generation %+v (%v), want number %d", next, err, gen.N+1)
	}
	if gens, err := set.Generations(); err != nil || len(gens) != 2 || gens[0].N != gen.N {
		t.Fatalf("generations %+v (%v)", gens, err)
	}

	if err := gen.Remove(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		attached, err = link.QueryPrograms(link.QueryOptions{Target: mustOpen(t, cg.Dir), Attach: ebpf.AttachCGroupInetEgress})
		if err == nil && len(attached.Programs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("program still attached after its generation was removed: %+v %v", attached, err)
		}
	}
	if _, err := os.Stat(gen.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("removed generation %s still exists: %v", gen.Dir, err)
	}
}

func mustOpen(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}
