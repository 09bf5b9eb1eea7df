//go:build linux

package daemon

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/openoxide/oxsupervise/audit"
)

// otlpReceiver is a minimal OTLP/HTTP logs receiver: every log record's
// attributes (string values) as they arrived.
type otlpReceiver struct {
	mu   sync.Mutex
	recs []map[string]string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var req collogs.ExportLogsServiceRequest
	if r.URL.Path != "/v1/logs" || proto.Unmarshal(data, &req) != nil {
		http.Error(w, "want an OTLP ExportLogsServiceRequest on /v1/logs", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rl := range req.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				a := map[string]string{}
				for _, kv := range lr.Attributes {
					a[kv.Key] = kv.Value.GetStringValue()
				}
				o.recs = append(o.recs, a)
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (o *otlpReceiver) denials() []map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []map[string]string
	for _, a := range o.recs {
		if a["oxsupervise.kind"] == "denial" {
			out = append(out, a)
		}
	}
	return out
}

const otlpReads = 3

// deniedPolicy is managed policy that makes outside/secret unreadable in
// sessions, plus extra lines.
func deniedPolicy(t *testing.T, w *world, extra string) {
	t.Helper()
	secret := filepath.Join(w.outside, "secret")
	if err := os.MkdirAll(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(secret, "key.txt"), "k\n", 0)
	writeFile(t, filepath.Join(w.opts.ManagedDir, "policy.toml"), fmt.Sprintf("[sandbox]\ndeny_read = [%q]\n%s", secret, extra), 0)
}

// refuseReads runs a session of nobody that is refused otlpReads reads of
// a deny_read file (Landlock's refusal, audited through kernel audit; a
// write outside the writable roots is refused at the mount level with
// EROFS, which the kernel does not audit) and returns the log's denials.
func refuseReads(t *testing.T, w *world) []audit.Record {
	t.Helper()
	script := `for i in 1 2 3; do cat "$OUT/secret/key.txt"; done; true`
	res := w.runHelper(t, nobody, w.ws, []string{"OUT=" + w.outside}, "run", w.ws, "sh", "-c", script)
	if res.code != 0 || strings.Count(res.stderr, "Permission denied") != otlpReads || strings.Contains(res.stdout, "k") {
		t.Fatalf("want %d refused reads: exit %d\nstdout %s\nstderr %s", otlpReads, res.code, res.stdout, res.stderr)
	}
	var out []audit.Record
	for _, r := range readRecords(t, w.audit) {
		if r.Ox.Kind == audit.KindDenial {
			out = append(out, r)
		}
	}
	if len(out) != otlpReads {
		t.Fatalf("%d denial records in the local log, want %d", len(out), otlpReads)
	}
	return out
}

// A daemon whose managed policy names an OTLP collector exports each
// refusal of a session there, with the record's ECS fields as attributes.
func TestDaemonOTLPExport(t *testing.T) {
	w := newWorld(t)
	if abi, ok := landlockUsable(); !ok {
		t.Skipf("SKIPPED, NOT PASSED: Landlock ABI %d unusable: no write refusals to export", abi)
	}
	rc := &otlpReceiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	deniedPolicy(t, w, fmt.Sprintf("[audit.otlp]\nendpoint = %q\n", srv.URL))
	w.start(t)
	local := refuseReads(t, w)

	// The exporter batches for up to a second: a liveness bound.
	deadline := time.Now().Add(30 * time.Second)
	for len(rc.denials()) < len(local) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	got := rc.denials()
	if len(got) != len(local) {
		t.Fatalf("the collector got %d denial records, the local log has %d", len(got), len(local))
	}
	for i, r := range local {
		a := got[i]
		for k, want := range map[string]string{
			"oxsupervise.session": r.Ox.Session, "oxsupervise.layer": string(r.Ox.Layer),
			"event.action": r.Event.Action, "event.outcome": r.Event.Outcome, "file.path": r.File.Path,
			"process.name": r.Process.Name,
		} {
			if a[k] != want || want == "" {
				t.Errorf("record %d: %s = %q, the local log says %q", i, k, a[k], want)
			}
		}
	}
}

// With the collector down the records stay in the local log, and the
// records that could not be exported are counted there (events_lost of
// the supervisor, rule audit.otlp) and in the metric.
func TestDaemonOTLPCollectorDown(t *testing.T) {
	w := newWorld(t)
	if abi, ok := landlockUsable(); !ok {
		t.Skipf("SKIPPED, NOT PASSED: Landlock ABI %d unusable: no write refusals to export", abi)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	maddr := freePort(t)
	deniedPolicy(t, w, fmt.Sprintf("[metrics]\nlisten = %q\n[audit.otlp]\nendpoint = \"http://%s\"\n", maddr, down))
	w.opts.otlpRetry = 200 * time.Millisecond
	w.start(t)
	refuseReads(t, w)

	// Wait until the exporter has given up on every record in the log.
	inLog := len(readRecords(t, w.audit))
	var dropped float64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		fams, _ := scrape(t, maddr)
		if dropped = value(fams, "oxsupervise_otlp_dropped_records_total"); dropped >= float64(inLog) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("otlp_dropped_records_total %v after 30s, want at least the %d records in the log", dropped, inLog)
		}
	}
	w.stop()

	var summarized uint64
	denials := 0
	for _, r := range readRecords(t, w.audit) {
		switch {
		case r.Ox.Kind == audit.KindDenial:
			denials++
		case r.Ox.Kind == audit.KindEventsLost && r.Ox.Layer == audit.LayerSupervisor && r.Ox.Rule == "audit.otlp":
			summarized += r.Ox.EventsLost
			if !strings.Contains(r.Message, "not exported to the OTLP collector at http://"+down) {
				t.Errorf("summary message %q does not name the collector", r.Message)
			}
		}
	}
	if denials != otlpReads {
		t.Errorf("%d denial records in the local log after the export failed, want %d", denials, otlpReads)
	}
	if float64(summarized) < dropped {
		t.Errorf("the local log counts %d records not exported, the metric %v", summarized, dropped)
	}
}
