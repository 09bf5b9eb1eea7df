package capset

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// Effective is the set the kernel renders as CapEff for the same thread.
func TestEffectiveIsStatusCapEff(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	got, err := Effective()
	if err != nil {
		t.Fatalf("Effective: %v", err)
	}
	status, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		t.Fatalf("read status: %v", err)
	}
	if want := fmt.Sprintf("CapEff:\t%016x\n", got); !strings.Contains(string(status), want) {
		t.Fatalf("Effective = %016x, not the CapEff of /proc/thread-self/status:\n%s", got, status)
	}
}
