//go:build linux

package bpfring_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit/bpfring"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/loader"
)

// producer is a BPF program that puts one record with the given header
// into the ring buffer each time it runs and counts a failed reservation
// in the loss counter of its source, as bpf/events.h does: the ring is
// exercised by the kernel's own ring buffer code, not a stand-in.
type producer struct {
	prog *ebpf.Program
}

func newProducer(t *testing.T, maps *loader.EventMaps, source loader.Source, cgroupID uint64, suppressed int32) *producer {
	t.Helper()
	const size = 32
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:    ebpf.SocketFilter,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.LoadMapPtr(asm.R1, maps.Ring.FD()),
			asm.Mov.Imm(asm.R2, size),
			asm.Mov.Imm(asm.R3, 0),
			asm.FnRingbufReserve.Call(),
			asm.JEq.Imm(asm.R0, 0, "lost"),
			asm.StoreImm(asm.R0, 0, int64(source), asm.Word),
			asm.StoreImm(asm.R0, 4, 0, asm.Word),
			asm.LoadImm(asm.R1, int64(cgroupID), asm.DWord),
			asm.StoreMem(asm.R0, 8, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R1, suppressed),
			asm.StoreMem(asm.R0, 16, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R1, 0),
			asm.StoreMem(asm.R0, 24, asm.R1, asm.DWord),
			asm.Mov.Reg(asm.R1, asm.R0),
			asm.Mov.Imm(asm.R2, 0),
			asm.FnRingbufSubmit.Call(),
			asm.Ja.Label("out"),
			// lost: oxs_events_lost[source]++ on this CPU.
			asm.StoreImm(asm.RFP, -4, int64(source), asm.Word).WithSymbol("lost"),
			asm.LoadMapPtr(asm.R1, maps.Lost.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -4),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "out"),
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.Add.Imm(asm.R1, 1),
			asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatalf("load the test producer: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	return &producer{prog: prog}
}

func (p *producer) emit(t *testing.T, n int) {
	t.Helper()
	if _, err := p.prog.Run(&ebpf.RunOptions{Data: make([]byte, 14), Repeat: uint32(n)}); err != nil {
		t.Fatalf("run the test producer: %v", err)
	}
}

// collector is a Consumer that keeps what it is given.
type collector struct {
	mu      sync.Mutex
	headers []bpfring.Header
	lost    uint64
}

func (c *collector) Record(h bpfring.Header, raw []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.headers = append(c.headers, h)
}

func (c *collector) Lost(n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost += n
}

func (c *collector) counts() (int, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.headers), c.lost
}

func openRing(t *testing.T, opts bpfring.Options) *bpfring.Ring {
	t.Helper()
	testutil.RequireRoot(t)
	r, err := bpfring.Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// Records go to the consumer of their source, each exactly once, and
// Drain returns only when all queued ones were handed over.
func TestDispatchBySource(t *testing.T) {
	var warn testutil.SyncBuffer
	r := openRing(t, bpfring.Options{Warn: &warn})
	var fs, net collector
	unsubFS, err := r.Subscribe(loader.SourceFS, &fs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Subscribe(loader.SourceNet, &net); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Subscribe(loader.SourceFS, &collector{}); err == nil || !strings.Contains(err.Error(), "filesystem events: they have a consumer already") {
		t.Errorf("second filesystem consumer: %v, want refused", err)
	}
	if _, err := r.Subscribe(loader.Sources, &collector{}); err == nil {
		t.Error("a consumer of a source that does not exist was accepted")
	}
	newProducer(t, r.Maps(), loader.SourceFS, 7, 3).emit(t, 1000)
	newProducer(t, r.Maps(), loader.SourceNet, 8, 0).emit(t, 500)
	r.Drain()
	if n, _ := fs.counts(); n != 1000 {
		t.Errorf("filesystem consumer got %d records, want 1000", n)
	}
	if n, _ := net.counts(); n != 500 {
		t.Errorf("network consumer got %d records, want 500", n)
	}
	if h := fs.headers[0]; h != (bpfring.Header{Source: loader.SourceFS, CgroupID: 7, Suppressed: 3}) {
		t.Errorf("filesystem header %+v", h)
	}
	if h := net.headers[0]; h != (bpfring.Header{Source: loader.SourceNet, CgroupID: 8}) {
		t.Errorf("network header %+v", h)
	}

	// Without a consumer a record is still said, on the warning stream.
	unsubFS()
	newProducer(t, r.Maps(), loader.SourceFS, 9, 0).emit(t, 1)
	r.Drain()
	if n, _ := fs.counts(); n != 1000 {
		t.Errorf("an unsubscribed consumer got records: %d", n)
	}
	if !strings.Contains(warn.String(), "filesystem refusal of cgroup 9 has no consumer") {
		t.Errorf("warnings %q do not report the record without a consumer", warn.String())
	}
}

// A full ring buffer loses records: the consumer of their source is told
// how many, once, and the records it got plus the lost ones are exactly
// the records the programs tried to send.
func TestFullRingAccounting(t *testing.T) {
	r := openRing(t, bpfring.Options{Size: 64 << 10})
	if r.Size() != 64<<10 {
		t.Fatalf("Size() = %d, want %d", r.Size(), 64<<10)
	}
	var fs, net collector
	r.Subscribe(loader.SourceFS, &fs)
	r.Subscribe(loader.SourceNet, &net)
	// About 1 600 records fit; the program sends them back to back, far
	// faster than any reader empties the ring.
	const n = 100000
	newProducer(t, r.Maps(), loader.SourceNet, 5, 0).emit(t, n)
	// Whenever LossesPassedOn says so, the consumer has been told of
	// every loss counted (the reader may have checked on its own).
	if passed, err := r.LossesPassedOn(loader.SourceNet); err != nil {
		t.Fatal(err)
	} else if total, _ := r.Lost(loader.SourceNet); passed {
		if _, told := net.counts(); told < total {
			t.Errorf("LossesPassedOn(network) before Drain: true with %d of %d losses told", told, total)
		}
	}
	r.Drain()
	for _, src := range []loader.Source{loader.SourceNet, loader.SourceFS} {
		if passed, err := r.LossesPassedOn(src); err != nil || !passed {
			t.Errorf("LossesPassedOn(%s) after Drain = %v, %v; want true", src, passed, err)
		}
	}
	got, lost := net.counts()
	t.Logf("%d records: %d read, %d lost", n, got, lost)
	if uint64(got)+lost != n {
		t.Errorf("read %d + lost %d = %d, want exactly %d", got, lost, uint64(got)+lost, n)
	}
	if got, lost := fs.counts(); got != 0 || lost != 0 {
		t.Errorf("filesystem consumer got %d records and %d losses of network records", got, lost)
	}
	if total, err := r.Lost(loader.SourceNet); err != nil || total != lost {
		t.Errorf("Lost(network) = %d, %v; want the %d reported", total, err, lost)
	}
	// Reported once: a later drain adds nothing.
	r.Drain()
	if _, again := net.counts(); again != lost {
		t.Errorf("losses reported twice: %d, then %d", lost, again)
	}
}

func TestFloodBuckets(t *testing.T) {
	r := openRing(t, bpfring.Options{})
	if err := r.StartSession(42, loader.SourceFS, 100, 1000); err != nil {
		t.Fatal(err)
	}
	if err := r.StartSession(42, loader.SourceFS, 100, 1000); err == nil {
		t.Error("a second bucket for the same session and source was accepted")
	}
	if err := r.StartSession(42, loader.SourceNet, 0, 0); err != nil {
		t.Errorf("the same session's network bucket: %v", err)
	}
	var b loader.FloodBucket
	if err := r.Maps().Flood.Lookup(loader.FloodKey{CgroupId: 42, Source: uint32(loader.SourceFS)}, &b); err != nil {
		t.Fatal(err)
	}
	if b.IntervalNs != uint64(10*time.Millisecond) || b.BurstNs != 999*uint64(10*time.Millisecond) {
		t.Errorf("bucket %+v: want an interval of 10ms and a burst of 999 intervals", b)
	}
	if c, err := r.Counts(42, loader.SourceFS); err != nil || c != (bpfring.Counts{}) {
		t.Errorf("Counts of a new session = %+v, %v", c, err)
	}
	if err := r.EndSession(42, loader.SourceFS); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Counts(42, loader.SourceFS); err == nil {
		t.Error("Counts of an ended session succeeded")
	}
	if err := r.EndSession(42, loader.SourceFS); err != nil {
		t.Errorf("ending a session twice: %v", err)
	}
}

func TestOpenRejectsBadSizes(t *testing.T) {
	testutil.RequireRoot(t)
	for _, size := range []int{3 << 20, 100, 2 << 30} {
		r, err := bpfring.Open(bpfring.Options{Size: size})
		if err == nil {
			r.Close()
			t.Errorf("size %d accepted", size)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprint(size)) {
			t.Errorf("size %d: error %q does not name it", size, err)
		}
	}
}

func TestParseHeader(t *testing.T) {
	raw := make([]byte, 24)
	raw[0], raw[8], raw[16] = 2, 9, 4
	h, err := bpfring.ParseHeader(raw)
	if err != nil || h != (bpfring.Header{Source: loader.SourceNet, CgroupID: 9, Suppressed: 4}) {
		t.Errorf("ParseHeader = %+v, %v", h, err)
	}
	if _, err := bpfring.ParseHeader(bytes.Repeat([]byte{1}, 23)); err == nil {
		t.Error("a record shorter than its header was accepted")
	}
}

// ringMappings counts this process's mappings of BPF maps (a ring buffer
// maps its consumer page and its data pages).
func ringMappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "anon_inode:bpf-map")
}

// The ring is mapped only once it holds a record, and whenever it is
// mapped the records are handed over exactly as before: queued before the
// reader started, queued while it waited unmapped, and read only by Close.
func TestRingMappedForRecordsOnly(t *testing.T) {
	testutil.RequireRoot(t)
	cases := []struct {
		name string
		// before: records queued before Open; after: queued after it.
		before, after int
		drain         bool // Drain before Close
	}{
		{name: "nothing queued", drain: true},
		{name: "queued before the reader started", before: 40, drain: true},
		{name: "queued while the reader waited", after: 25, drain: true},
		{name: "read by Close alone", after: 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := ringMappings(t)
			maps, err := loader.NewEventMaps(64 << 10)
			if err != nil {
				t.Fatal(err)
			}
			if tc.before > 0 {
				newProducer(t, maps, loader.SourceNet, 11, 0).emit(t, tc.before)
			}
			r, err := bpfring.Open(bpfring.Options{Maps: maps})
			if err != nil {
				maps.Close()
				t.Fatal(err)
			}
			var net collector
			r.Subscribe(loader.SourceNet, &net)
			if tc.before == 0 {
				r.Drain()
				if n := ringMappings(t); n != base {
					r.Close()
					t.Fatalf("an empty ring is mapped: %d bpf-map mappings, %d before Open", n, base)
				}
			}
			if tc.after > 0 {
				newProducer(t, r.Maps(), loader.SourceNet, 12, 0).emit(t, tc.after)
			}
			if tc.drain {
				r.Drain()
				got, _ := net.counts()
				if got != tc.before+tc.after {
					t.Errorf("after Drain: %d records handed over, want %d", got, tc.before+tc.after)
				}
				if mapped := ringMappings(t) > base; mapped != (got > 0) {
					t.Errorf("after Drain with %d records: mapped %v", got, mapped)
				}
			}
			if err := r.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if got, lost := net.counts(); got != tc.before+tc.after || lost != 0 {
				t.Errorf("after Close: %d records and %d lost, want %d and 0", got, lost, tc.before+tc.after)
			}
			if n := ringMappings(t); n != base {
				t.Errorf("after Close: %d bpf-map mappings, %d before Open", n, base)
			}
		})
	}
}

// A Drain after Close, or beside it, returns and touches nothing of the
// closed ring: its wake-up goes to no descriptor another file now has.
func TestDrainAfterClose(t *testing.T) {
	testutil.RequireRoot(t)
	r, err := bpfring.Open(bpfring.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var p [2]int
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// The descriptors the ring released are likely the pipe's now.
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	for range 100 {
		r.Drain()
	}
	var b [8]byte
	if n, err := unix.Read(p[0], b[:]); n > 0 || !errors.Is(err, unix.EAGAIN) {
		t.Errorf("a pipe opened after Close read %d bytes (%v): a Drain wrote to a descriptor it no longer had", n, err)
	}
	if n, _ := unix.Write(p[1], []byte{1}); n != 1 {
		t.Errorf("the pipe's write end took %d bytes", n)
	}
}
