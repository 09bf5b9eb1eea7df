//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loadWatch samples, while a figure is measured, the load average and
// which other CPU-heavy work runs on the machine, so a figure says what
// it competed with: this host is shared with builds and test runs.
type loadWatch struct {
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	samples int
	lo, hi  float64
	seen    map[string]int // kind of foreign work -> samples it was seen in
}

func watchLoad(every time.Duration) *loadWatch {
	w := &loadWatch{stop: make(chan struct{}), done: make(chan struct{}), lo: -1, seen: map[string]int{}}
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			w.sample()
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *loadWatch) sample() {
	load := loadAvg1()
	kinds := foreignWork()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	if w.lo < 0 || load < w.lo {
		w.lo = load
	}
	w.hi = max(w.hi, load)
	for _, k := range kinds {
		w.seen[k]++
	}
}

// note stops the watch and describes what it saw.
func (w *loadWatch) note() string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	s := fmt.Sprintf("Machine load while this figure was measured: 1-minute load average %.2f–%.2f on %d CPUs (%d samples).", w.lo, w.hi, cpuCount(), w.samples)
	if len(w.seen) == 0 {
		return s + " No `make test`, `go test`/`go build`, Go test binary or qemu VM of other work was running in any sample."
	}
	var kinds []string
	for k := range w.seen {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s (in %d of %d samples)", k, w.seen[k], w.samples))
	}
	return s + " **Other work was using the CPU at the same time**: " + strings.Join(parts, ", ") + "; absolute times are inflated by it, the interleaved ratios less so."
}

func loadAvg1() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func cpuCount() int {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(raw), "processor\t:")
}

// foreignWork lists the kinds of heavy work other than this harness that
// run now: `make test`/`make bench`-style make runs, the go command,
// Go test binaries and qemu VMs.
func foreignWork() []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	found := map[string]bool{}
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if k := workKind(argv); k != "" {
			found[k] = true
		}
	}
	var out []string
	for k := range found {
		out = append(out, k)
	}
	return out
}

// workKind names the kind of heavy work argv is ("" for anything else).
func workKind(argv []string) string {
	base := filepath.Base(argv[0])
	switch {
	case base == "make" && len(argv) > 1 && !slices.Contains(argv, "bench"): // make bench is this run
		return "`make " + strings.Join(argv[1:], " ") + "`"
	case base == "go" && len(argv) > 1 && slices.Contains([]string{"test", "build", "vet", "run", "install"}, argv[1]):
		return "`go " + argv[1] + "`"
	case strings.HasSuffix(base, ".test"):
		return "Go test binaries"
	case strings.HasPrefix(base, "qemu-system"):
		return "a qemu VM"
	}
	return ""
}
