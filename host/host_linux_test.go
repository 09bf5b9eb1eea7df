//go:build linux

package host_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/host"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/planner"
)

// A host with Generations pinning pins the network layer's own links and
// maps as it builds it (no inference from descriptors): the pinned links
// are the programs attached on the sessions' parent, and they stay
// attached after the host closes; removing the generation detaches them.
func TestHostPinsItsNetworkLayer(t *testing.T) {
	cg := testutil.NewCgroup(t)
	root, err := testutil.Cgroup2Root()
	if err != nil {
		t.Fatal(err)
	}
	// The sessions' parent is the test group.
	rel, err := filepath.Rel(root, cg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	pinDir := filepath.Join(loader.BPFFSMount, "oxs-host-test-"+filepath.Base(cg.Dir))
	t.Cleanup(func() { os.RemoveAll(pinDir) })
	h := host.Open(host.Options{Cgroup: cgroup.Config{Mount: root, Parent: rel}, Pins: host.Generations{Dir: pinDir}},
		planner.Want{Network: true})
	if h.NetworkErr() != nil {
		h.Close()
		testutil.SkipUnlessVM(t, "cgroup network programs do not load here: %v", h.NetworkErr())
	}
	if h.PinErr() != nil {
		h.Close()
		testutil.SkipUnlessVM(t, "no bpffs for pins: %v", h.PinErr())
	}
	if !errors.Is(h.FSErr(), planner.ErrNotProvided) {
		t.Errorf("filesystem layer not asked for, but its reason is %v", h.FSErr())
	}
	p, ok := h.Pins(planner.LayerNetwork)
	if !ok {
		t.Fatalf("network layer not pinned: %v", h.PinFailed(planner.LayerNetwork))
	}
	if p.Generation.Dir != filepath.Join(pinDir, "net", "gen-1") || len(p.Old) != 0 {
		t.Fatalf("pinned as %+v, want %s/net/gen-1 and no older generation", p, pinDir)
	}
	if keys, err := p.Generation.SessionKeys("net_sessions"); err != nil || len(keys) != 0 {
		t.Fatalf("pinned session map: keys %v (%v), want none", keys, err)
	}
	// The pinned links are the programs attached on the parent.
	attached := map[ebpf.ProgramID]bool{}
	f, err := os.Open(cg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: ebpf.AttachCGroupInet4Connect})
	if err != nil {
		t.Fatal(err)
	}
	for _, ap := range res.Programs {
		attached[ap.ID] = true
	}
	names, err := p.Generation.Links()
	if err != nil || len(names) == 0 {
		t.Fatalf("pinned links %v (%v)", names, err)
	}
	found := false
	for _, name := range names {
		l, err := link.LoadPinnedLink(filepath.Join(p.Generation.Dir, "links", name), nil)
		if err != nil {
			t.Fatalf("open pinned link %s: %v", name, err)
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		found = found || attached[info.Program]
	}
	if !found {
		t.Fatalf("no pinned link %v holds the connect4 program attached on %s (%v)", names, cg.Dir, attached)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	res, err = link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: ebpf.AttachCGroupInet4Connect})
	if err != nil || len(res.Programs) != len(attached) {
		t.Fatalf("after the host closed: %+v (%v), want the %d pinned programs still attached", res, err, len(attached))
	}
	if err := p.Generation.Remove(); err != nil {
		t.Fatal(err)
	}
}

// One supervisor at a time holds a Cache: the pinned programs report into
// one ring buffer, whose reader must be the supervisor of every session in
// their maps. A second one is told the pins are busy (and loads its own);
// once the first releases them, the next one holds them.
func TestCacheLease(t *testing.T) {
	testutil.RequireRoot(t)
	dir, err := os.MkdirTemp(loader.BPFFSMount, "oxs-lease-test-")
	if err != nil {
		testutil.SkipUnlessVM(t, "no bpffs at %s: %v", loader.BPFFSMount, err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	first, second := &host.Cache{Dir: dir}, &host.Cache{Dir: dir}
	if err := first.Prepare(0); err != nil {
		t.Fatal(err)
	}
	if err := second.Prepare(0); !errors.Is(err, host.ErrPinsBusy) {
		t.Fatalf("second supervisor while the first holds the pins: %v, want ErrPinsBusy", err)
	}
	// Another ring size is another directory, with a lease of its own.
	other := &host.Cache{Dir: dir}
	if err := other.Prepare(1 << 16); err != nil {
		t.Fatalf("a cache of another ring size: %v", err)
	}
	other.Release()
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := second.Prepare(0); err != nil {
		t.Fatalf("after the first released the pins: %v", err)
	}
	second.Release()
}

// A Cache remembers a BPF-LSM probe the kernel refused with EPERM, so the
// next standalone start does not parse the kernel's BTF to be refused
// again: the second host's filesystem layer is absent with the remembered
// refusal (still EPERM), and removing the memory probes again. Where the
// probe loads (the VM), there is nothing to remember: the layer is built.
func TestCacheRemembersRefusedBPFLSMProbe(t *testing.T) {
	testutil.RequireRoot(t)
	dir, err := os.MkdirTemp(loader.BPFFSMount, "oxs-probe-test-")
	if err != nil {
		testutil.SkipUnlessVM(t, "no bpffs at %s: %v", loader.BPFFSMount, err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The kernel's answer, asked independently of the host.
	probeErr := loader.ProbeBPFLSM()
	if probeErr == nil || !errors.Is(probeErr, unix.EPERM) || errors.Is(probeErr, loader.ErrBPFNotInLSMList) {
		t.Skipf("SKIPPED, NOT PASSED: this kernel does not refuse the BPF-LSM probe with EPERM (%v): nothing to remember", probeErr)
	}
	open := func() error {
		t.Helper()
		h := host.Open(host.Options{Pins: &host.Cache{Dir: dir}}, planner.Want{BPFLSM: true})
		defer h.Close()
		if h.FS() != nil {
			t.Fatal("the filesystem layer was built on a kernel that refuses the probe")
		}
		return h.FSErr()
	}
	first := open()
	if !errors.Is(first, unix.EPERM) || errors.Is(first, host.ErrProbeRefusedEarlier) {
		t.Fatalf("first host: %v, want the kernel's EPERM, probed", first)
	}
	markers, _ := filepath.Glob(filepath.Join(dir, "probes", "bpf-lsm-eperm-*"))
	if len(markers) != 1 {
		t.Fatalf("remembered refusals after the first host: %v, want one", markers)
	}
	second := open()
	if !errors.Is(second, unix.EPERM) || !errors.Is(second, host.ErrProbeRefusedEarlier) {
		t.Fatalf("second host: %v, want the remembered EPERM", second)
	}
	// Another supervisor holding the pins does not make this one probe:
	// the refusal is the kernel's, not the lease's.
	holder := &host.Cache{Dir: dir}
	if err := holder.Prepare(0); err != nil {
		t.Fatal(err)
	}
	busy := open()
	holder.Release()
	if !errors.Is(busy, unix.EPERM) || !errors.Is(busy, host.ErrProbeRefusedEarlier) {
		t.Fatalf("host while another holds the pins: %v, want the remembered EPERM", busy)
	}
	if err := os.RemoveAll(filepath.Join(dir, "probes")); err != nil {
		t.Fatal(err)
	}
	if third := open(); !errors.Is(third, unix.EPERM) || errors.Is(third, host.ErrProbeRefusedEarlier) {
		t.Fatalf("host after the memory was removed: %v, want the kernel's EPERM, probed again", third)
	}
}

// failingPins is Generations whose Pin fails.
type failingPins struct{ host.Generations }

func (failingPins) Pin(string, uint64, loader.Objects) (host.Pinned, error) {
	return host.Pinned{}, errors.New("pin refused by the test")
}

// CloseForExit leaves the layers to the process's exit only where their
// pins keep them: with every layer pinned it closes nothing (the layer is
// still open in this process), and where a pin failed or nothing is
// pinned it closes the layers as Close does.
func TestHostCloseForExitClosesWhatIsNotPinned(t *testing.T) {
	cg := testutil.NewCgroup(t)
	root, err := testutil.Cgroup2Root()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(root, cg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	pinDir := filepath.Join(loader.BPFFSMount, "oxs-exit-test-"+filepath.Base(cg.Dir))
	t.Cleanup(func() { os.RemoveAll(pinDir) })
	for _, tt := range []struct {
		name string
		pins host.Pinning
		// left says CloseForExit leaves the layer open, for the exit.
		left bool
	}{
		{"every layer pinned", host.Generations{Dir: filepath.Join(pinDir, "ok")}, true},
		{"a pin failed", failingPins{host.Generations{Dir: filepath.Join(pinDir, "failing")}}, false},
		{"nothing pinned", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := host.Open(host.Options{Cgroup: cgroup.Config{Mount: root, Parent: rel}, Pins: tt.pins}, planner.Want{Network: true})
			defer h.Close()
			if h.NetworkErr() != nil {
				testutil.SkipUnlessVM(t, "cgroup network programs do not load here: %v", h.NetworkErr())
			}
			if tt.pins != nil && h.PinErr() != nil {
				testutil.SkipUnlessVM(t, "no bpffs for pins: %v", h.PinErr())
			}
			if _, pinned := h.Pins(planner.LayerNetwork); pinned != tt.left {
				t.Fatalf("network layer pinned %v (%v), want %v", pinned, h.PinFailed(planner.LayerNetwork), tt.left)
			}
			if err := h.CloseForExit(); err != nil {
				t.Fatal(err)
			}
			if left := h.Network() != nil; left != tt.left {
				t.Fatalf("after CloseForExit the network layer is open: %v, want %v", left, tt.left)
			}
		})
	}
}
