//go:build linux

package fsvmtest

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// barrierEnv names a directory where a burst helper announces that it has
// started (a file "ready.PID") and then waits for a file "go": bursts of
// several helpers then begin together, after every helper's start-up.
const barrierEnv = "FSOP_BARRIER"

func barrier() {
	dir := os.Getenv(barrierEnv)
	if dir == "" {
		return
	}
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("ready.%d", os.Getpid())), nil, 0o644)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// connectBurst makes n TCP connects to the IPv4 address addr and prints
// "connect=N" with how many were refused with EPERM (any other outcome is
// an error).
func connectBurst(count, addr string) int {
	n, err := strconv.Atoi(count)
	ap, perr := netip.ParseAddrPort(addr)
	if err != nil || perr != nil || !ap.Addr().Is4() {
		fmt.Fprintln(os.Stderr, "usage: connect-burst N IPV4:PORT")
		return 2
	}
	sa := &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	refused := 0
	for i := 0; i < n; i++ {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "attempt %d: socket: %v\n", i, err)
			return 1
		}
		err = unix.Connect(fd, sa)
		unix.Close(fd)
		if err != unix.EPERM {
			fmt.Fprintf(os.Stderr, "attempt %d: connect: %v\n", i, err)
			return 1
		}
		refused++
	}
	fmt.Printf("connect=%d\n", refused)
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

// TestBothLayersShareTheRing: a run session whose filesystem (BPF-LSM) and
// network (cgroup) programs refuse bursts at the same time. Both report
// through the one ring buffer run opens; each layer's records plus its
// suppressed and events_lost counts equal its refusals exactly, and no
// record goes to the wrong layer or nowhere. The barrier starts both
// bursts together, after both helpers are up.
func TestBothLayersShareTheRing(t *testing.T) {
	requireBPFLSM(t)
	const attempts = 5000
	e := newEnv(t)
	target := filepath.Join(e.outside, "both.txt")
	bar := filepath.Join(e.ws, "barrier")
	if err := os.Mkdir(bar, 0o777); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`"$SELF" %[1]s deny-burst %[2]d %[3]q & "$SELF" %[1]s connect-burst %[2]d 192.0.2.1:9 &
while [ "$(ls %[4]q | grep -c ready)" -lt 2 ]; do sleep 0.05; done; : > %[4]q/go; wait`, fsopVerb, attempts, target, bar)
	code, stdout, stderr := e.runCLI(t, []string{barrierEnv + "=" + bar}, script)
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if out := strings.Fields(stdout); !slices.Contains(out, fmt.Sprintf("connect=%d", attempts)) || !slices.Contains(out, strconv.Itoa(attempts)) {
		t.Fatalf("refused attempts: %q, want %d opens and %d connects", stdout, attempts, attempts)
	}
	for _, bad := range []string{"has no consumer", "unknown session", "events lost", "not read before"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("stderr says %q:\n%s", bad, stderr)
		}
	}
	id, start := sessionOf(t, e.auditLog, 0)
	for _, layer := range []string{"bpf-lsm", "network"} {
		if !strings.Contains(start, layer) {
			t.Errorf("session_start layers %q lack %s: the test needs both layers", start, layer)
		}
	}
	type tally struct{ denials, suppressed, lost uint64 }
	got := map[audit.Layer]*tally{audit.LayerBPFLSM: {}, audit.LayerCgroupNet: {}}
	for _, r := range records(t, e.auditLog) {
		c := got[r.Ox.Layer]
		if c == nil {
			continue
		}
		switch r.Ox.Kind {
		case audit.KindDenial:
			if r.Ox.Session != id {
				t.Errorf("denial of another session %q: %+v", r.Ox.Session, r)
			}
			if r.Ox.Layer == audit.LayerBPFLSM && (r.File == nil || r.File.Path != target) {
				t.Errorf("a filesystem refusal the bursts did not make: %s by %+v", r.Message, r.Process)
				continue
			}
			c.denials++
		case audit.KindSuppressed:
			c.suppressed += r.Ox.Suppressed
		case audit.KindEventsLost:
			c.lost += r.Ox.EventsLost
		}
	}
	for layer, c := range got {
		t.Logf("%s: %d denial records + %d suppressed + %d events_lost", layer, c.denials, c.suppressed, c.lost)
		if c.denials+c.suppressed+c.lost != attempts {
			t.Errorf("%s: %d + %d + %d = %d, want exactly %d", layer, c.denials, c.suppressed, c.lost, c.denials+c.suppressed+c.lost, attempts)
		}
		if c.denials == 0 {
			t.Errorf("%s: no denial record at all", layer)
		}
	}
}
