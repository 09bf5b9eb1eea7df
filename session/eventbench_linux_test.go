//go:build linux

package session_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// BenchmarkKernelEventsToFile reports the sustained rate of refusals from
// the BPF programs through the shared ring buffer, the network layer and
// the audit sink into the JSON-lines file: b.N connects refused by a
// session with network none, flood control out of the way, timed from the
// first connect until the session's teardown has settled every count. What
// the ring could not hold is counted (events_lost), never missing.
func BenchmarkKernelEventsToFile(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("SKIP: needs root (cgroups and BPF programs)")
	}
	root, err := cgroup.Cgroup2Mount()
	if err != nil {
		b.Skipf("SKIP: no cgroup2 mount: %v", err)
	}
	dir := b.TempDir()
	burst := filepath.Join(dir, "netburst")
	if out, err := exec.Command("go", "build", "-o", burst, "./testdata/netburst").CombinedOutput(); err != nil {
		b.Fatalf("go build netburst: %v\n%s", err, out)
	}
	parent := filepath.Join(root, fmt.Sprintf("oxs-eventbench-%d", os.Getpid()))
	child := filepath.Join(parent, "s")
	if err := os.MkdirAll(child, 0o755); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(parent)
	defer os.Remove(child)
	id, err := cgroup.ID(child)
	if err != nil {
		b.Fatal(err)
	}
	unlimited := audit.FloodOptions{Rate: math.MaxInt32, Burst: math.MaxInt32}
	layer, err := session.NewNetworkLayer(session.NetworkConfig{Parent: parent, Flood: unlimited})
	if err != nil {
		b.Skipf("SKIP: the cgroup network programs do not load here: %v", err)
	}
	defer layer.Close()
	log := filepath.Join(dir, "audit.jsonl")
	c := &policy.Compiled{Mode: policy.ModeWorkspaceWrite,
		Network: policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackNone}, Audit: policy.Audit{Path: log}}
	td, err := layer.Apply(context.Background(), session.SessionInfo{ID: "bench", CgroupPath: child, CgroupID: id, Policy: c})
	if err != nil {
		b.Fatal(err)
	}
	cg, err := os.Open(child)
	if err != nil {
		b.Fatal(err)
	}
	defer cg.Close()

	b.ResetTimer()
	start := time.Now()
	cmd := exec.Command(burst, fmt.Sprint(b.N), "192.0.2.1:9")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("netburst: %v", err)
	}
	if err := td(context.Background()); err != nil {
		b.Fatalf("session teardown: %v", err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if !strings.Contains(string(out), fmt.Sprintf("eperm=%d\n", b.N)) {
		b.Fatalf("netburst: %q, want all %d connects refused", out, b.N)
	}
	// The sink rotates at 64 MiB: read the rotated files too.
	rotated, _ := filepath.Glob(log + ".*")
	var recs []audit.Record
	for _, f := range append(rotated, log) {
		recs = append(recs, readAudit(b, f)...)
	}
	var denials, lost, suppressed uint64
	for _, r := range recs {
		switch r.Ox.Kind {
		case audit.KindDenial:
			denials++
		case audit.KindEventsLost:
			lost += r.Ox.EventsLost
		case audit.KindSuppressed:
			suppressed += r.Ox.Suppressed
		}
	}
	if denials+lost+suppressed != uint64(b.N) {
		b.Fatalf("%d refusals: %d records + %d events_lost + %d suppressed do not add up", b.N, denials, lost, suppressed)
	}
	b.ReportMetric(float64(denials)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(lost), "lost")
}
