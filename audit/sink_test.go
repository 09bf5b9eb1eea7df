package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func denial(session string, pid int, op, path string) *Record {
	return &Record{
		Process: &Process{PID: pid, Name: "t"},
		File:    &File{Path: path},
		Event:   Event{Action: op},
		Ox:      Ox{Kind: KindDenial, Session: session, Layer: LayerBPFLSM, Class: ClassFile, Errno: 13},
	}
}

func readAll(t *testing.T, path string) []Record {
	t.Helper()
	var out []Record
	err := Tail(context.Background(), path, TailOptions{History: true, OnError: func(err error) { t.Errorf("tail: %v", err) }},
		func(r Record, _ []byte) error { out = append(out, r); return nil })
	if err != nil {
		t.Fatalf("tail %s: %v", path, err)
	}
	return out
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		want string
	}{
		{"unknown kind", Record{Ox: Ox{Kind: "bogus"}}, `kind "bogus"`},
		{"unknown layer", Record{Ox: Ox{Kind: KindSessionStart, Session: "s", Layer: "selinux"}}, `layer "selinux"`},
		{"denial without op", Record{Ox: Ox{Kind: KindDenial, Layer: LayerCgroupNet, Class: ClassNetwork}}, "event.action"},
		{"denial without class", Record{Event: Event{Action: "open"}, Ox: Ox{Kind: KindDenial, Layer: LayerCgroupNet}}, "class"},
		{"zero events lost", Record{Ox: Ox{Kind: KindEventsLost}}, "zero count"},
		{"zero suppressed", Record{Ox: Ox{Kind: KindSuppressed}}, "zero count"},
		{"session start without session", Record{Ox: Ox{Kind: KindSessionStart}}, "oxsupervise.session"},
		{"approval without id", Record{Ox: Ox{Kind: KindApproval}}, "approval.id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewEncoder(io.Discard).Marshal(&tt.rec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Marshal error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestNormalizeKeepsProducerValues(t *testing.T) {
	r := denial("s", 1, "open", "/x")
	r.Error = &Error{Code: "EROFS"}
	r.Event.Category = []string{"file", "configuration"}
	r.Normalize()
	if r.Error.Code != "EROFS" || len(r.Event.Category) != 2 {
		t.Fatalf("Normalize replaced producer values: %+v %+v", r.Error, r.Event)
	}
	if r.Event.Kind != "event" || r.Event.Outcome != "failure" || r.Event.Type[0] != "denied" || r.Ox.Decision != "deny" {
		t.Fatalf("Normalize did not derive ECS fields: %+v", r.Event)
	}
}

func TestSinkPermissionsAndRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log", "oxsupervise")
	path := filepath.Join(dir, "audit.jsonl")
	s, err := OpenFileSink(path, SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(denial("s", 1, "open", "/etc/passwd")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
	if err := s.Write(denial("s", 1, "open", "/x")); err == nil {
		t.Error("write after close succeeded")
	}

	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileSink(link, SinkOptions{}); err == nil {
		t.Error("OpenFileSink followed a symlink")
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileSink(filepath.Join(open, "audit.jsonl"), SinkOptions{}); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("OpenFileSink in a world-writable directory: err = %v", err)
	}
}

// TestSinkRotationKeepsEveryRecord writes from several goroutines into a
// sink that rotates every few records and checks that the rotated files
// plus the live file hold every record exactly once, each file ends on a
// record boundary and no file exceeds the limit by more than one record.
func TestSinkRotationKeepsEveryRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const maxBytes = 4096
	s, err := OpenFileSink(path, SinkOptions{MaxBytes: maxBytes, Keep: 1000})
	if err != nil {
		t.Fatal(err)
	}
	const writers, perWriter = 4, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if err := s.Write(denial(fmt.Sprintf("w%d", w), i+1, "open", fmt.Sprintf("/f/%d/%d", w, i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Rotations < 10 || st.RotationErrors != 0 {
		t.Fatalf("stats %+v: expected many clean rotations", st)
	}
	files, _ := filepath.Glob(path + "*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 || b[len(b)-1] != '\n' {
			t.Errorf("%s does not end on a record boundary", f)
		}
		if len(b) > maxBytes {
			t.Errorf("%s is %d bytes, limit %d", f, len(b), maxBytes)
		}
	}
	seen := map[string]int{}
	for _, r := range readAll(t, path) {
		seen[r.File.Path]++
	}
	if len(seen) != writers*perWriter {
		t.Fatalf("read %d distinct records, wrote %d", len(seen), writers*perWriter)
	}
	for p, n := range seen {
		if n != 1 {
			t.Fatalf("record %s read %d times", p, n)
		}
	}
}

func TestSinkKeepsNewestFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := OpenFileSink(path, SinkOptions{MaxBytes: 1, Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := s.Write(denial("s", i+1, "open", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	// MaxBytes 1: every record gets its own file; the live one plus 3 kept.
	recs := readAll(t, path)
	var got []string
	for _, r := range recs {
		got = append(got, r.File.Path)
	}
	if strings.Join(got, ",") != "6,7,8,9" {
		t.Fatalf("records after rotation = %v, want the newest four in order", got)
	}
	if _, err := os.Stat(path + ".4"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s.4 exists beyond Keep=3", path)
	}
}

func TestSinkSyncPolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := OpenFileSink(path, SinkOptions{SyncEvery: 3, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		s.Write(denial("s", 1, "open", "/x"))
	}
	if n := s.Stats().Syncs; n != 0 {
		t.Fatalf("synced %d times before SyncEvery records", n)
	}
	s.Write(denial("s", 1, "open", "/x"))
	if n := s.Stats().Syncs; n != 1 {
		t.Fatalf("synced %d times after SyncEvery records, want 1", n)
	}
	// session_stop's sync runs behind the write, unasked: the sink does
	// it without a Sync or Close (a liveness bound, not a speed
	// assertion). The record is in the file when Write returns.
	if err := s.Write(&Record{Ox: Ox{Kind: KindSessionStop, Session: "s"}}); err != nil {
		t.Fatal(err)
	}
	if recs := readAll(t, path); len(recs) != 4 || recs[3].Ox.Kind != KindSessionStop {
		t.Fatalf("after Write returned, the file holds %d records (want 4, session_stop last)", len(recs))
	}
	for deadline := time.Now().Add(30 * time.Second); s.Stats().Syncs != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("session_stop not synced after 30s (syncs=%d, want 2)", s.Stats().Syncs)
		}
	}
	// Nothing is left to sync: Close does not sync again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Syncs; n != 2 {
		t.Fatalf("Close after session_stop's sync synced again (syncs=%d, want 2)", n)
	}
}

// The sync behind a session_stop fails as a Write's own would: Write has
// returned by then, so its error is Close's (and Sync's), whether that
// sync ran before Close or Close did it in its place. Here the live file
// is a pipe, which takes the record and refuses fsync.
func TestSinkReportsFailedSyncBehindSessionStop(t *testing.T) {
	for _, tt := range []struct {
		name string
		// settle waits for the sync behind (or not), then ends the sink.
		settle func(t *testing.T, s *FileSink) error
	}{
		{"closed at once", func(t *testing.T, s *FileSink) error { return s.Close() }},
		{"closed after the sync behind failed", func(t *testing.T, s *FileSink) error {
			waitSyncErr(t, s)
			return s.Close()
		}},
		{"synced after the sync behind failed", func(t *testing.T, s *FileSink) error {
			waitSyncErr(t, s)
			err := s.Sync()
			s.Close()
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenFileSink(filepath.Join(t.TempDir(), "audit.jsonl"), SinkOptions{SyncInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if w.Sync() == nil {
				s.Close()
				t.Skip("SKIPPED: this platform syncs pipes: no failing fsync to report")
			}
			s.mu.Lock()
			s.f.Close()
			s.f = w
			s.mu.Unlock()
			if err := s.Write(&Record{Ox: Ox{Kind: KindSessionStop, Session: "s"}}); err != nil {
				t.Fatalf("Write of session_stop: %v, want nil (the record was written)", err)
			}
			if err := tt.settle(t, s); err == nil || !strings.Contains(err.Error(), "fsync audit log") {
				t.Fatalf("after session_stop's failed sync: %v, want the fsync's error", err)
			}
			if n := s.Stats().Syncs; n != 0 {
				t.Fatalf("syncs=%d after the sync failed, want 0", n)
			}
		})
	}
}

// waitSyncErr waits until the sync behind a session_stop has failed (a
// liveness bound).
func waitSyncErr(t *testing.T, s *FileSink) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		failed := s.syncErr != nil
		s.mu.Unlock()
		if failed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the sync behind session_stop did not fail within 30s")
		}
	}
}

func TestFilter(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := denial("s1", 42, "unlink", "/x")
	rec.Timestamp = base
	rec.Normalize()
	stop := &Record{Timestamp: base, Ox: Ox{Kind: KindSessionStop, Session: "s1"}}
	stop.Normalize()
	tests := []struct {
		name   string
		filter Filter
		rec    *Record
		want   bool
	}{
		{"empty matches", Filter{}, rec, true},
		{"session", Filter{Session: "s1"}, rec, true},
		{"other session", Filter{Session: "s2"}, rec, false},
		{"pid", Filter{PID: 42}, rec, true},
		{"other pid", Filter{PID: 43}, rec, false},
		{"pid on record without process", Filter{PID: 42}, stop, false},
		{"op", Filter{Op: "unlink"}, rec, true},
		{"other op", Filter{Op: "open"}, rec, false},
		{"op names kind for non-denials", Filter{Op: "session_stop"}, stop, true},
		{"since before", Filter{Since: base.Add(-time.Second)}, rec, true},
		{"since equal", Filter{Since: base}, rec, true},
		{"since after", Filter{Since: base.Add(time.Second)}, rec, false},
		{"all match", Filter{Session: "s1", PID: 42, Op: "unlink", Since: base}, rec, true},
		{"one of several fails", Filter{Session: "s1", PID: 42, Op: "open"}, rec, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.filter.Match(tt.rec); got != tt.want {
				t.Fatalf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTailFollowAcrossRotation follows the log while writers append
// concurrently and the sink rotates many times, and asserts the follower
// sees every record exactly once and in per-writer order.
func TestTailFollowAcrossRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := OpenFileSink(path, SinkOptions{MaxBytes: 8 << 10, Keep: 100000, SyncInterval: -1, SyncEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Records written before the follower starts must be seen too.
	if err := s.Write(denial("pre", 1, "open", "pre")); err != nil {
		t.Fatal(err)
	}

	const writers, perWriter = 3, 2000
	total := writers*perWriter + 1
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[string]int{}
	lastSeq := map[string]int{}
	var gaps []error
	done := make(chan error, 1)
	go func() {
		done <- Tail(ctx, path, TailOptions{Follow: true, Poll: time.Millisecond,
			OnError: func(err error) { gaps = append(gaps, err) }},
			func(r Record, _ []byte) error {
				seen[r.File.Path]++
				if r.Process.PID <= lastSeq[r.Ox.Session] {
					return fmt.Errorf("writer %s: record %d after %d", r.Ox.Session, r.Process.PID, lastSeq[r.Ox.Session])
				}
				lastSeq[r.Ox.Session] = r.Process.PID
				if len(seen) == total {
					cancel()
				}
				return nil
			})
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if err := s.Write(denial(fmt.Sprintf("w%d", w), i+1, "open", fmt.Sprintf("%d/%d", w, i))); err != nil {
					t.Error(err)
					return
				}
				if i%200 == 0 {
					time.Sleep(time.Millisecond) // let the follower fall behind and catch up
				}
			}
		}()
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("Tail: %v", err)
	}
	if rot := s.Stats().Rotations; rot < 20 {
		t.Fatalf("only %d rotations; the test needs many", rot)
	}
	if len(gaps) > 0 {
		t.Fatalf("follower reported: %v", gaps)
	}
	if len(seen) != total {
		t.Fatalf("follower saw %d distinct records, want %d", len(seen), total)
	}
	for p, n := range seen {
		if n != 1 {
			t.Fatalf("record %s seen %d times", p, n)
		}
	}
}

func TestTailReportsBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	good, _ := NewEncoder(nil).Marshal(denial("s", 1, "open", "/x"))
	content := "not json\n" + string(good) + `{"no":"schema"}` + "\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	var errs []error
	var recs []Record
	err := Tail(context.Background(), path, TailOptions{OnError: func(err error) { errs = append(errs, err) }},
		func(r Record, _ []byte) error { recs = append(recs, r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].File.Path != "/x" {
		t.Fatalf("records = %+v, want the one good line", recs)
	}
	if len(errs) != 2 {
		t.Fatalf("errors = %v, want one per bad line", errs)
	}
}

func TestFormatHuman(t *testing.T) {
	r := denial("s-1", 77, "unlink", "/etc/hosts")
	r.Timestamp = time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	r.Ox.Rule = "outside writable roots"
	r.Ox.Ancestry = []Ancestor{{PID: 70, Name: "bash"}, {PID: 60, Name: "node"}}
	r.Normalize()
	plain := FormatHuman(r, HumanOptions{})
	for _, want := range []string{"2026-01-02T03:04:05.006Z", "s-1", "bpf-lsm", "denial", "unlink", "77", "/etc/hosts", "EACCES", "rule=outside writable roots", "under=bash<node"} {
		if !strings.Contains(plain, want) {
			t.Errorf("human line %q lacks %q", plain, want)
		}
	}
	if strings.Contains(plain, "\x1b[") {
		t.Errorf("uncoloured line has escape codes: %q", plain)
	}
	if col := FormatHuman(r, HumanOptions{Colour: true}); !strings.HasPrefix(col, ansiRed) || !strings.HasSuffix(col, ansiReset) {
		t.Errorf("coloured denial %q is not red", col)
	}
}

func BenchmarkFileSink(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts SinkOptions
	}{
		{"default-sync", SinkOptions{}},
		{"no-sync", SinkOptions{SyncEvery: -1, SyncInterval: -1}},
		{"sync-every-record", SinkOptions{SyncEvery: 1, SyncInterval: -1}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := OpenFileSink(filepath.Join(b.TempDir(), "audit.jsonl"), tc.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			rec := exampleRecords()[0].rec
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r := rec
				if err := s.Write(&r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// TestTailFollowReportsGap rotates the follower's file away (Keep=1) faster
// than it polls: the loss must be reported, never silent.
func TestTailFollowReportsGap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := OpenFileSink(path, SinkOptions{MaxBytes: 1, Keep: 1, SyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var paths []string
	gap := make(chan struct{}, 1)
	go Tail(ctx, path, TailOptions{Follow: true, Poll: 300 * time.Millisecond,
		OnError: func(err error) {
			if errors.Is(err, ErrGap) {
				select {
				case gap <- struct{}{}:
				default:
				}
			}
		}},
		func(r Record, _ []byte) error {
			mu.Lock()
			defer mu.Unlock()
			paths = append(paths, r.File.Path)
			return nil
		})
	s.Write(denial("s", 1, "open", "first"))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(paths)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
	}
	for i := range 5 {
		s.Write(denial("s", 2+i, "open", fmt.Sprint(i)))
	}
	select {
	case <-gap:
	case <-ctx.Done():
		t.Fatal("follower lost rotated files without reporting a gap")
	}
}
