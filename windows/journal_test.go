package windows

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testPlan(t *testing.T) *Plan {
	t.Helper()
	p, err := NewPlan(workspaceWrite(), testSession, Environment{AllowDegraded: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestJournalRoundTrip(t *testing.T) {
	p := testPlan(t)
	now := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	j := NewJournal(p, 4242, 1234567890, now)
	j.Entries[0].State = StateApplied
	j.Entries[0].OriginalSDDL = "D:PAI(A;OICI;FA;;;SY)"
	path := JournalPath(t.TempDir(), testSession)
	if err := j.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, j) {
		t.Fatalf("round trip changed the journal:\n got  %+v\n want %+v", got, j)
	}
	if len(got.Entries) != len(p.ACEs) {
		t.Fatalf("journal has %d entries for %d ACEs", len(got.Entries), len(p.ACEs))
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".journal-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

func TestLoadJournalRejectsTampering(t *testing.T) {
	p := testPlan(t)
	dir := t.TempDir()
	tests := []struct {
		name   string
		mutate func(j *Journal)
		want   string
	}{
		{"foreign session sid", func(j *Journal) { j.SessionSID = "S-1-5-21-1-2-3-4" }, "does not belong"},
		{"foreign entry sid", func(j *Journal) { j.Entries[1].SID = "S-1-5-32-545" }, "not the session's"},
		{"bad state", func(j *Journal) { j.Entries[0].State = "half" }, "unknown state"},
		{"bad version", func(j *Journal) { j.Version = 99 }, "version 99"},
		{"bad session id", func(j *Journal) { j.SessionID = "../x" }, "session id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := NewJournal(p, 1, 1, time.Now())
			tt.mutate(j)
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".json")
			if err := j.Save(path); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadJournal(path); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadJournal err = %v, want %q", err, tt.want)
			}
		})
	}
	torn := filepath.Join(dir, "torn.json")
	os.WriteFile(torn, []byte(`{"version":1,"entries":[`), 0o600)
	if _, err := LoadJournal(torn); err == nil {
		t.Fatal("torn journal accepted")
	}
}

// fakeACL models DACLs as path -> set of SIDs holding session ACEs.
type fakeACL struct {
	aces    map[string]map[string]int
	fail    map[string]bool
	revoked []string
}

func (f *fakeACL) revoke(path, sid string) error {
	if f.fail[path] {
		return fmt.Errorf("access denied")
	}
	if _, ok := f.aces[path]; !ok {
		return fmt.Errorf("stat %s: %w", path, fs.ErrNotExist)
	}
	delete(f.aces[path], sid)
	f.revoked = append(f.revoked, path)
	return nil
}

func applyAll(f *fakeACL, j *Journal, upTo int) {
	for i := 0; i < upTo; i++ {
		e := &j.Entries[i]
		if f.aces[e.Path] == nil {
			f.aces[e.Path] = map[string]int{}
		}
		f.aces[e.Path][e.SID]++
		e.State = StateApplied
	}
}

func TestUndo(t *testing.T) {
	p := testPlan(t)
	j := NewJournal(p, 1, 1, time.Now())
	f := &fakeACL{aces: map[string]map[string]int{}, fail: map[string]bool{}}
	for _, e := range j.Entries {
		f.aces[e.Path] = map[string]int{"S-1-5-18": 1}
	}
	// Crash after applying 3 entries: entries 3.. are planned only.
	applyAll(f, j, 3)
	saves := 0
	if err := j.Undo(f.revoke, func(*Journal) error { saves++; return nil }); err != nil {
		t.Fatal(err)
	}
	if !j.Complete() {
		t.Fatal("journal not complete after undo")
	}
	for path, sids := range f.aces {
		if sids[p.SessionSID] != 0 {
			t.Errorf("%s still has a session ACE", path)
		}
		if sids["S-1-5-18"] != 1 {
			t.Errorf("%s lost an ACE that was not the session's", path)
		}
	}
	if saves != len(j.Entries) {
		t.Errorf("journal saved %d times, want after each of %d entries", saves, len(j.Entries))
	}
	// Newest first.
	if f.revoked[0] != j.Entries[len(j.Entries)-1].Path {
		t.Errorf("first revoke on %s, want the newest entry %s", f.revoked[0], j.Entries[len(j.Entries)-1].Path)
	}
	// A second undo is a no-op.
	n := len(f.revoked)
	if err := j.Undo(f.revoke, func(*Journal) error { return nil }); err != nil || len(f.revoked) != n {
		t.Errorf("second undo: err=%v, %d more revokes", err, len(f.revoked)-n)
	}
}

func TestUndoContinuesPastFailures(t *testing.T) {
	p := testPlan(t)
	j := NewJournal(p, 1, 1, time.Now())
	f := &fakeACL{aces: map[string]map[string]int{}, fail: map[string]bool{}}
	applyAll(f, j, len(j.Entries))
	locked := j.Entries[0].Path
	f.fail[locked] = true
	delete(f.aces, j.Entries[1].Path) // deleted during the session
	err := j.Undo(f.revoke, func(*Journal) error { return nil })
	if err == nil || !strings.Contains(err.Error(), locked) {
		t.Fatalf("err = %v, want one naming %s", err, locked)
	}
	if j.Entries[0].State == StateReverted {
		t.Error("failed entry marked reverted")
	}
	if j.Entries[1].State != StateReverted {
		t.Error("entry for a vanished path not marked reverted")
	}
	if j.Complete() {
		t.Error("journal complete despite a failure")
	}
	for i := 2; i < len(j.Entries); i++ {
		if j.Entries[i].State != StateReverted {
			t.Errorf("entry %d not reverted after an unrelated failure", i)
		}
	}
	saveErr := errors.New("disk full")
	j2 := NewJournal(p, 1, 1, time.Now())
	if err := j2.Undo(func(string, string) error { return nil }, func(*Journal) error { return saveErr }); !errors.Is(err, saveErr) {
		t.Errorf("save failure not reported: %v", err)
	}
}

func TestRecoverStale(t *testing.T) {
	dir := t.TempDir()
	mk := func(session string, pid int) string {
		p, err := NewPlan(workspaceWrite(), session, Environment{AllowDegraded: true})
		if err != nil {
			t.Fatal(err)
		}
		j := NewJournal(p, pid, 100, time.Now())
		path := JournalPath(dir, session)
		if err := j.Save(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	dead := mk("dead-session", 111)
	live := mk("live-session", 222)
	garbage := JournalPath(dir, "garbage")
	os.WriteFile(garbage, []byte("not json"), 0o600)

	f := &fakeACL{aces: map[string]map[string]int{}, fail: map[string]bool{}}
	deadSID, _ := SessionSID("dead-session")
	j, _ := LoadJournal(dead)
	for _, e := range j.Entries {
		f.aces[e.Path] = map[string]int{deadSID: 1}
	}
	alive := func(pid int, start int64) bool { return pid == 222 && start == 100 }
	res, err := RecoverStale(dir, alive, f.revoke)
	if err != nil {
		t.Fatal(err)
	}
	bySession := map[string]Recovered{}
	var garbageErr error
	for _, r := range res {
		if r.Path == garbage {
			garbageErr = r.Err
			continue
		}
		bySession[r.SessionID] = r
	}
	if r, ok := bySession["dead-session"]; !ok || r.Err != nil {
		t.Errorf("dead session not recovered: %+v", r)
	}
	if _, ok := bySession["live-session"]; ok {
		t.Error("a live supervisor's journal was replayed")
	}
	if garbageErr == nil {
		t.Error("unreadable journal not reported")
	}
	if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("replayed journal not removed: %v", err)
	}
	for _, p := range []string{live, garbage} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	for path, sids := range f.aces {
		if sids[deadSID] != 0 {
			t.Errorf("%s still grants the dead session", path)
		}
	}
}
