//go:build linux

package daemon

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// TestDaemonAttachFailsClosedWithoutBPFLSM: the daemon's attach follows
// the planner's rule: on a kernel without a usable BPF-LSM (the
// independent probe says so) a policy with filesystem rules is refused
// (code boundary, exit 125 in the CLI) with the pid, doctor's remedy and
// the network_only choice named, and nothing moved or registered; asked
// for network only, the same process is attached.
func TestDaemonAttachFailsClosedWithoutBPFLSM(t *testing.T) {
	if testutil.IndependentLSMProbe(t).Usable() {
		t.Skip("SKIPPED, NOT PASSED: BPF-LSM is usable here, so attach holds filesystem rules; the refusal needs a kernel without it")
	}
	w := newWorld(t)
	w.start(t)
	sleeper := execCommand("sleep", "60")
	sleeper.SysProcAttr.Credential = credentialFor(nobody)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	pid := sleeper.Process.Pid
	before, err := cgroup.CgroupOf(pid)
	if err != nil {
		t.Fatal(err)
	}

	res := w.runHelper(t, nobody, w.ws, nil, "attachstrict", itoa(pid))
	if res.code == 0 || !strings.Contains(res.stderr, "ERR boundary") {
		t.Fatalf("attach without BPF-LSM: exit %d, stderr %q; want a boundary refusal", res.code, res.stderr)
	}
	for _, want := range []string{fmt.Sprintf("pid %d", pid), "layer bpf-lsm", "need BPF-LSM", "--network-only", "nothing was moved", "remedy: "} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("refusal lacks %q: %s", want, res.stderr)
		}
	}
	for _, dont := range []string{"RemoveMemlock", "probe:"} {
		if strings.Contains(res.stderr, dont) {
			t.Errorf("refusal shows the loader's words %q: %s", dont, res.stderr)
		}
	}
	if got, _ := cgroup.CgroupOf(pid); got != before {
		t.Errorf("pid %d moved from %s to %s although attach refused", pid, before, got)
	}
	if ids, _ := cgroupSessions(w); len(ids) != 0 {
		t.Errorf("session groups after the refusal: %v", ids)
	}
	if entries, _ := os.ReadDir(w.opts.Registry.Dir); len(entries) != 0 {
		t.Errorf("registry entries after the refusal: %v", entries)
	}

	res = w.runHelper(t, nobody, w.ws, nil, "attach", itoa(pid))
	if res.code != 0 {
		t.Fatalf("attach network-only: exit %d, stderr %q", res.code, res.stderr)
	}
	if id, in, _ := sessionOfPID(w, pid); !in {
		t.Errorf("network-only attach did not move pid %d into a session (%q)", pid, id)
	}
	if !strings.Contains(res.stdout, "does NOT enforce the policy's filesystem rules") {
		t.Errorf("network-only attach did not warn that filesystem rules are not enforced: %s", res.stdout)
	}
}
