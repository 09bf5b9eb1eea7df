package audit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// parseJournal decodes a native-protocol datagram in the binary field form.
func parseJournal(t *testing.T, b []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 || len(b) < i+9 {
			t.Fatalf("truncated field in %q", b)
		}
		key := string(b[:i])
		n := binary.LittleEndian.Uint64(b[i+1 : i+9])
		b = b[i+9:]
		if uint64(len(b)) < n+1 || b[n] != '\n' {
			t.Fatalf("field %s: bad length %d", key, n)
		}
		out[key] = string(b[:n])
		b = b[n+1:]
	}
	return out
}

// TestSinkForwardsToJournal: with Journal set, every record written to the
// file also reaches the journald socket, with the JSON record intact.
func TestSinkForwardsToJournal(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "journal.socket")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sink, err := OpenFileSink(filepath.Join(dir, "log", "audit.jsonl"), SinkOptions{Journal: sock, SyncInterval: -1})
	if err != nil {
		t.Fatalf("OpenFileSink: %v", err)
	}
	defer sink.Close()

	tests := []struct {
		name     string
		rec      *Record
		priority string
	}{
		{"denial", &Record{Message: "open refused\nsecond line", Event: Event{Action: "open"}, Ox: Ox{Kind: KindDenial, Session: "s-1", Layer: LayerBPFLSM, Class: ClassFile}}, "4"},
		{"session start", &Record{Ox: Ox{Kind: KindSessionStart, Session: "s-1"}}, "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := sink.Write(tt.rec); err != nil {
				t.Fatalf("Write: %v", err)
			}
			buf := make([]byte, 64<<10)
			ln.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := ln.Read(buf)
			if err != nil {
				t.Fatalf("read journal datagram: %v", err)
			}
			f := parseJournal(t, buf[:n])
			if f["SYSLOG_IDENTIFIER"] != "oxsupervise" || f["PRIORITY"] != tt.priority || f["OXSUPERVISE_KIND"] != string(tt.rec.Ox.Kind) {
				t.Errorf("fields %v", f)
			}
			if f["MESSAGE"] == "" {
				t.Error("empty MESSAGE")
			}
			var back Record
			if err := json.Unmarshal([]byte(f["OXSUPERVISE_RECORD"]), &back); err != nil {
				t.Fatalf("OXSUPERVISE_RECORD is not the JSON record: %v", err)
			}
			if back.Ox.Kind != tt.rec.Ox.Kind || back.Ox.Session != tt.rec.Ox.Session || back.Message != tt.rec.Message {
				t.Errorf("journal record %+v, wrote %+v", back.Ox, tt.rec.Ox)
			}
		})
	}
	if st := sink.Stats(); st.Records != 2 || st.JournalErrors != 0 {
		t.Errorf("stats %+v: want 2 records, no journal errors", st)
	}
}

func TestSinkJournalUnavailable(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenFileSink(filepath.Join(dir, "audit.jsonl"), SinkOptions{Journal: filepath.Join(dir, "absent.socket")}); err == nil {
		t.Fatal("OpenFileSink with an absent journald socket succeeded, want an error naming it")
	}
}
