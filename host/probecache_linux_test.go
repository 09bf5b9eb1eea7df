//go:build linux

package host

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/internal/capset"
)

// conditionsFromFiles is probeConditions as it was computed from the
// files alone (/proc/sys/kernel/osrelease, /proc/self/status's CapEff
// line): the digest names the remembered refusals of earlier builds.
func conditionsFromFiles(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	for _, f := range []string{"/proc/sys/kernel/random/boot_id", "/proc/sys/kernel/osrelease",
		"/sys/kernel/security/lsm", "/sys/kernel/security/lockdown"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Skipf("SKIPPED, NOT PASSED: %v", err)
		}
		fmt.Fprintf(h, "%s=%q\n", f, b)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "CapEff:") {
			fmt.Fprintf(h, "%s\n", line)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// The probe cache's key, from uname(2) and capget(2), is the one the
// files give (a refusal remembered by an earlier build is found), and
// capget's effective set is the one /proc/self/status says.
func TestProbeConditionsAreTheFilesOnes(t *testing.T) {
	got, err := probeConditions()
	if err != nil {
		t.Skipf("SKIPPED, NOT PASSED: %v", err)
	}
	if want := conditionsFromFiles(t); got != want {
		t.Fatalf("probeConditions = %s, the files give %s", got, want)
	}
	capEff, err := capset.Effective()
	if err != nil {
		t.Fatal(err)
	}
	status, _ := os.ReadFile("/proc/self/status")
	if want := fmt.Sprintf("CapEff:\t%016x\n", capEff); !strings.Contains(string(status), want) {
		t.Fatalf("capget's effective set %q is not /proc/self/status's:\n%s", want, status)
	}
}
