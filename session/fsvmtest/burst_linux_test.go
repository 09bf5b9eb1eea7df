//go:build linux

package fsvmtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
)

// denyBurst tries to open path for writing n times and prints how many
// attempts were refused with EACCES (any other outcome is an error).
func denyBurst(count, path string) int {
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	refused := 0
	for i := 0; i < n; i++ {
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(fd)
			fmt.Fprintf(os.Stderr, "attempt %d: open succeeded\n", i)
			return 1
		}
		if err != unix.EACCES {
			fmt.Fprintf(os.Stderr, "attempt %d: %v\n", i, err)
			return 1
		}
		refused++
	}
	fmt.Println(refused)
	return 0
}

// TestDenialBurstAccounting: 100 000 denied opens from one session end up
// in the audit log exactly: each is a denial record, or counted in a
// suppressed record (flood control, kernel or userspace), or in an
// events_lost record (ring buffer full). Nothing vanishes.
func TestDenialBurstAccounting(t *testing.T) {
	requireBPFLSM(t)
	const attempts = 100000
	e := newEnv(t)
	target := filepath.Join(e.outside, "burst.txt")
	code, stdout, stderr := e.runCLI(t, nil, fmt.Sprintf(`"$SELF" %s deny-burst %d %q`, fsopVerb, attempts, target))
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if got := strings.TrimSpace(stdout); got != strconv.Itoa(attempts) {
		t.Fatalf("refused attempts = %q, want %d", got, attempts)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Fatalf("%s exists: a refused create happened", target)
	}
	id, _ := sessionOf(t, e.auditLog, 0)
	var denials, suppressed, lost uint64
	for _, r := range records(t, e.auditLog) {
		if r.Ox.Layer != audit.LayerBPFLSM {
			continue
		}
		switch r.Ox.Kind {
		case audit.KindDenial:
			if r.Ox.Session == id && r.File != nil && r.File.Path == target {
				denials++
			}
		case audit.KindSuppressed:
			if r.Ox.Session == id {
				suppressed += r.Ox.Suppressed
			}
		case audit.KindEventsLost:
			lost += r.Ox.EventsLost
		}
	}
	t.Logf("%d attempts: %d denial records + %d suppressed + %d events_lost", attempts, denials, suppressed, lost)
	if denials+suppressed+lost != attempts {
		t.Fatalf("denial records %d + suppressed %d + events_lost %d = %d, want exactly %d",
			denials, suppressed, lost, denials+suppressed+lost, attempts)
	}
	if denials == 0 {
		t.Fatal("no denial record at all: flood control must let a burst through first")
	}
}
