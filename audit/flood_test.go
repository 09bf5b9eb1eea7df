package audit

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

type memWriter struct {
	mu   sync.Mutex
	recs []Record
	fail bool
}

func (m *memWriter) Write(r *Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return errors.New("disk full")
	}
	r.Normalize()
	if err := r.Validate(); err != nil {
		return err
	}
	m.recs = append(m.recs, *r)
	return nil
}

// TestFloodControlAccounting floods two sessions and checks, per session,
// that denial records plus suppressed counts equal the denials written,
// exactly, and that the limit held.
func TestFloodControlAccounting(t *testing.T) {
	clock := time.Unix(1000, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	mem := &memWriter{}
	fc := NewFloodControl(mem, FloodOptions{Rate: 10, Burst: 50, Now: now})
	want := map[string]int{"a": 100000, "b": 30}
	var wg sync.WaitGroup
	for session, n := range want {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				if err := fc.Write(denial(session, i+1, "open", fmt.Sprint(i))); err != nil {
					t.Error(err)
					return
				}
				if i == n/2 && session == "a" {
					mu.Lock()
					clock = clock.Add(2 * time.Second) // refills 20 tokens
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if err := fc.Write(&Record{Ox: Ox{Kind: KindSessionStop, Session: "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := fc.Flush(); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	denials := map[string]int{}
	for _, r := range mem.recs {
		switch r.Ox.Kind {
		case KindDenial:
			got[r.Ox.Session]++
			denials[r.Ox.Session]++
		case KindSuppressed:
			got[r.Ox.Session] += r.Ox.Suppressed
		}
	}
	for session, n := range want {
		if got[session] != uint64(n) {
			t.Errorf("session %s: records+suppressed = %d, want exactly %d", session, got[session], n)
		}
	}
	if denials["a"] > 50+20 {
		t.Errorf("session a wrote %d denial records; the bucket allows 70", denials["a"])
	}
	if denials["b"] != 30 {
		t.Errorf("session b (under its limit) wrote %d of 30 denials", denials["b"])
	}
}

func TestFloodControlKeepsCountOnWriteError(t *testing.T) {
	mem := &memWriter{}
	fc := NewFloodControl(mem, FloodOptions{Rate: 1e-9, Burst: 1})
	for i := range 5 {
		fc.Write(denial("s", i+1, "open", "/x"))
	}
	mem.fail = true
	if err := fc.Flush(); err == nil {
		t.Fatal("Flush hid a write error")
	}
	mem.fail = false
	if err := fc.Forget("s"); err != nil {
		t.Fatal(err)
	}
	last := mem.recs[len(mem.recs)-1]
	if last.Ox.Kind != KindSuppressed || last.Ox.Suppressed != 4 {
		t.Fatalf("after a failed flush the count was %+v, want suppressed 4", last.Ox)
	}
}
