package auditexport

import (
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/openoxide/oxsupervise/audit"
)

// Receiver is a minimal OTLP/HTTP logs receiver: it decodes each
// ExportLogsServiceRequest and keeps the log records with their resource.
type Receiver struct {
	mu       sync.Mutex
	Records  []*logspb.LogRecord
	Resource map[string]string
	// Hold, when set, blocks each request until it is closed.
	Hold chan struct{}
}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rc.Hold != nil {
		<-rc.Hold
	}
	if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/logs application/x-protobuf", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, _ := io.ReadAll(body)
	var req collogs.ExportLogsServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rl := range req.ResourceLogs {
		rc.Resource = map[string]string{}
		for _, kv := range rl.GetResource().GetAttributes() {
			rc.Resource[kv.Key] = kv.Value.GetStringValue()
		}
		for _, sl := range rl.ScopeLogs {
			rc.Records = append(rc.Records, sl.LogRecords...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (rc *Receiver) snapshot() []*logspb.LogRecord {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*logspb.LogRecord(nil), rc.Records...)
}

// attrs is a log record's attributes as strings.
func attrs(lr *logspb.LogRecord) map[string]string {
	out := map[string]string{}
	for _, kv := range lr.Attributes {
		v := kv.Value
		switch {
		case v.GetStringValue() != "":
			out[kv.Key] = v.GetStringValue()
		case v.GetArrayValue() != nil:
			out[kv.Key] = "array"
		default:
			out[kv.Key] = strconv.FormatInt(v.GetIntValue(), 10)
		}
	}
	return out
}

// writeLog writes n denial records of session s to a fresh audit log
// through the real sink and returns the log's path.
func writeLog(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	sink, err := audit.OpenFileSink(path, audit.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	for i := 0; i < n; i++ {
		r := &audit.Record{
			Event:   audit.Event{Action: "open"},
			Process: &audit.Process{PID: 100 + i, Name: "sh"},
			File:    &audit.File{Path: "/outside/f" + string(rune('a'+i))},
			Ox:      audit.Ox{Kind: audit.KindDenial, Session: "s-test", Layer: audit.LayerLandlock, Class: audit.ClassFile, Decision: "deny", Errno: 13},
		}
		if err := sink.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// export emits every record of the log at path, then closes; summaries
// land in the returned slice.
func export(t *testing.T, opts Options, path string) []*audit.Record {
	t.Helper()
	var mu sync.Mutex
	var summaries []*audit.Record
	opts.Record = func(r *audit.Record) error { mu.Lock(); summaries = append(summaries, r); mu.Unlock(); return nil }
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	err = audit.Tail(t.Context(), path, audit.TailOptions{}, func(r audit.Record, line []byte) error {
		e.Emit(t.Context(), &r, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	return summaries
}

func dropped(summaries []*audit.Record) uint64 {
	var n uint64
	for _, s := range summaries {
		n += s.Ox.EventsLost
	}
	return n
}

func TestExportToReceiver(t *testing.T) {
	rc := &Receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	const n = 5
	summaries := export(t, Options{Endpoint: srv.URL, Interval: 20 * time.Millisecond}, writeLog(t, n))
	if len(summaries) != 0 {
		t.Errorf("drop summaries with the receiver up: %+v", summaries)
	}
	recs := rc.snapshot()
	if len(recs) != n {
		t.Fatalf("the receiver got %d records, want %d", len(recs), n)
	}
	for i, lr := range recs {
		a := attrs(lr)
		for k, want := range map[string]string{
			"event.action": "open", "oxsupervise.layer": "landlock", "oxsupervise.kind": "denial",
			"oxsupervise.session": "s-test", "file.path": "/outside/f" + string(rune('a'+i)), "event.outcome": "failure",
		} {
			if a[k] != want {
				t.Errorf("record %d: %s = %q, want %q (attributes %v)", i, k, a[k], want, a)
			}
		}
		if lr.SeverityText != "WARN" || lr.TimeUnixNano == 0 || lr.GetBody().GetStringValue() == "" {
			t.Errorf("record %d: severity %q, time %d, body %v", i, lr.SeverityText, lr.TimeUnixNano, lr.GetBody())
		}
	}
	if rc.Resource["service.name"] != "oxsupervise" {
		t.Errorf("resource %v: no service.name oxsupervise", rc.Resource)
	}
}

// With the collector unreachable every record is dropped after the
// bounded retries, and the summaries in the local log say how many.
func TestExportReceiverDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const n = 4
	summaries := export(t, Options{Endpoint: "http://" + addr, Interval: 20 * time.Millisecond, RetryFor: 300 * time.Millisecond}, writeLog(t, n))
	if got := dropped(summaries); got != n {
		t.Fatalf("summaries count %d dropped records, want %d: %+v", got, n, summaries)
	}
	for _, s := range summaries {
		if s.Ox.Kind != audit.KindEventsLost || s.Ox.Layer != audit.LayerSupervisor || s.Ox.Rule != "audit.otlp" {
			t.Errorf("summary %+v is not an events_lost record of the supervisor with rule audit.otlp", s.Ox)
		}
	}
}

// A collector that does not answer holds the worker; the queue fills and
// what does not fit is dropped and counted: exported + dropped = emitted.
func TestExportQueueOverflow(t *testing.T) {
	rc := &Receiver{Hold: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	const n = 20
	var summaries []*audit.Record
	e, err := New(Options{Endpoint: srv.URL, QueueSize: 3, BatchSize: 1, Interval: time.Hour, RetryFor: 20 * time.Second,
		Record: func(r *audit.Record) error { summaries = append(summaries, r); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	// Emit does not block: one record in flight at the held receiver at
	// most, three queued, the rest dropped.
	err = audit.Tail(t.Context(), writeLog(t, n), audit.TailOptions{}, func(r audit.Record, line []byte) error {
		e.Emit(t.Context(), &r, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	close(rc.Hold)
	e.Close()
	got, drops := len(rc.snapshot()), dropped(summaries)
	if uint64(got)+drops != n || drops < n-4 {
		t.Fatalf("exported %d + dropped %d, want %d with at least %d dropped (queue of 3)", got, drops, n, n-4)
	}
}
