//go:build linux

package loader

import (
	"maps"
	"regexp"
	"sort"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// verifierBudget is the share of the kernel's 1 000 000 verified
// instructions a program may use. Far from the limit, a newer kernel's
// verifier (or a new rule) has room before a program stops loading; the
// network programs once took 425 000, with nested loops inlined at every
// call site, and a quarter of a second each to load.
const verifierBudget = 1_000_000 / 5

var processedInsns = regexp.MustCompile(`processed (\d+) insns`)

// loadWithStats loads each program of spec on its own and returns how many
// instructions the verifier processed for it.
func loadWithStats(t *testing.T, spec *ebpf.CollectionSpec, kernel *btf.Spec) map[string]int {
	t.Helper()
	events, err := NewEventMaps(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	out := map[string]int{}
	for name := range spec.Programs {
		one := spec.Copy()
		for other := range one.Programs {
			if other != name {
				delete(one.Programs, other)
			}
		}
		shared, err := events.share(one)
		if err != nil {
			t.Fatal(err)
		}
		coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{
			MapReplacements: shared,
			Programs:        ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats, KernelTypes: kernel},
		})
		if err != nil {
			t.Fatalf("load %s: %v", name, err)
		}
		m := processedInsns.FindStringSubmatch(coll.Programs[name].VerifierLog)
		coll.Close()
		if m == nil {
			t.Fatalf("%s: the verifier log has no instruction count: %q", name, coll.Programs[name].VerifierLog)
		}
		out[name], _ = strconv.Atoi(m[1])
	}
	return out
}

func checkBudget(t *testing.T, counts map[string]int) {
	t.Helper()
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("%-28s %7d verified instructions", n, counts[n])
		if counts[n] > verifierBudget {
			t.Errorf("%s: %d verified instructions, over the budget of %d", n, counts[n], verifierBudget)
		}
	}
}

func TestVerifierBudgetNetwork(t *testing.T) {
	testutil.RequireRoot(t)
	spec, err := loadNet()
	if err != nil {
		t.Fatal(err)
	}
	checkBudget(t, loadWithStats(t, spec, nil))
}

func TestVerifierBudgetFilesystem(t *testing.T) {
	if err := ProbeBPFLSM(); err != nil {
		testutil.SkipUnlessVM(t, "BPF-LSM not usable here (%v); the kernel-test VM checks this budget", err)
	}
	specs, kernel, _, err := lsmSpecs()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, spec := range specs {
		maps.Copy(counts, loadWithStats(t, spec, kernel))
	}
	checkBudget(t, counts)
}
