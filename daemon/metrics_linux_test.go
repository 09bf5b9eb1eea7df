//go:build linux

package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/openoxide/oxsupervise/audit"
)

// scrape reads the metrics endpoint and returns the families by name.
func scrape(t *testing.T, addr string) (map[string]*dto.MetricFamily, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v\n%s", addr, resp.StatusCode, err, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	return fams, body
}

// value is the sample of family name whose labels include every pair of
// labels ("k=v"); 0 when there is none yet.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	var sum float64
outer:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue outer
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		}
	}
	return sum
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// A daemon with [metrics] listen in its managed policy serves Prometheus
// metrics; a session of an unprivileged user is refused a write, reads of
// a deny_read file (Landlock) and a connect (cgroup program), and each
// refusal counter moves by exactly the number of audited refusals, as the
// audit log records them. The names pass client_golang's promlint.
func TestDaemonMetrics(t *testing.T) {
	w := newWorld(t)
	requireSockAddr(t, w)
	abi, llOK := landlockUsable()
	if !llOK {
		t.Skipf("SKIPPED, NOT PASSED: Landlock ABI %d unusable: the write refusals cannot be made", abi)
	}
	addr := freePort(t)
	deniedPolicy(t, w, fmt.Sprintf("[metrics]\nlisten = %q\n", addr))
	w.start(t)

	before, body := scrape(t, addr)
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, name := range []string{"oxsupervise_sessions_live", "oxsupervise_approvals_pending"} {
		if _, ok := before[name]; !ok {
			t.Errorf("%s is not served", name)
		}
	}

	// Reads of a deny_read file are Landlock's refusals; the write outside
	// the writable roots is refused at the mount level (EROFS) and audited
	// by the read-only view's tracer (on BPF-LSM machines it is the
	// program's refusal). Every one is in the log and the counters.
	const reads, connects = 2, 1
	script := `echo x > "$OUT/a.txt"; cat "$OUT/secret/key.txt"; cat "$OUT/secret/key.txt"; ` + connectScript(otherAddr)
	res := w.runHelper(t, nobody, w.ws, []string{"OUT=" + w.outside}, "netrun", w.ws, "none", "-", "sh", "-c", script)
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, otherAddr+"=EPERM\n") || strings.Count(res.stderr, "Permission denied") != reads ||
		!strings.Contains(res.stderr, "a.txt: Read-only file system") && !strings.Contains(res.stderr, "a.txt: Permission denied") {
		t.Fatalf("want a refused write, %d refused reads and a refused connect:\nstdout %s\nstderr %s", reads, res.stdout, res.stderr)
	}
	if exists(filepath.Join(w.outside, "a.txt")) {
		t.Fatal("a.txt was written outside the workspace")
	}

	// The session's refusals, as the audit log has them.
	recs := readRecords(t, w.audit)
	ids := startedSessions(recs)
	if len(ids) != 1 {
		t.Fatalf("session_start records %v, want 1", ids)
	}
	byLabel := map[[2]string]int{}
	perLayer := map[audit.Layer]int{}
	for _, r := range recs {
		if r.Ox.Kind == audit.KindDenial && r.Ox.Session == ids[0] {
			byLabel[[2]string{string(r.Ox.Layer), r.Event.Action}]++
			perLayer[r.Ox.Layer]++
		}
	}
	fsRefusals := perLayer[audit.LayerLandlock] + perLayer[audit.LayerBPFLSM] + perLayer[audit.LayerReadOnlyView]
	if fsRefusals != reads+1 || perLayer[audit.LayerCgroupNet] != connects {
		t.Fatalf("audit log: refusals by layer %v, want %d reads, the write and %d connect", perLayer, reads, connects)
	}

	// The counters catch up with the log (the daemon reads it back as it
	// is written); a liveness bound, not a speed assertion.
	deadline := time.Now().Add(30 * time.Second)
	for {
		after, _ := scrape(t, addr)
		var diffs []string
		check := func(what string, got, want float64) {
			if got != want {
				diffs = append(diffs, fmt.Sprintf("%s moved by %v, want %v", what, got, want))
			}
		}
		for lo, n := range byLabel {
			check(fmt.Sprintf("refusals_total{layer=%s,operation=%s}", lo[0], lo[1]),
				value(after, "oxsupervise_refusals_total", "layer="+lo[0], "operation="+lo[1])-
					value(before, "oxsupervise_refusals_total", "layer="+lo[0], "operation="+lo[1]), float64(n))
		}
		for layer, n := range perLayer {
			check("refusals_total{layer="+string(layer)+"}", value(after, "oxsupervise_refusals_total", "layer="+string(layer))-
				value(before, "oxsupervise_refusals_total", "layer="+string(layer)), float64(n))
		}
		check("refusals_total", value(after, "oxsupervise_refusals_total")-value(before, "oxsupervise_refusals_total"), float64(fsRefusals+connects))
		check("sessions_started_total", value(after, "oxsupervise_sessions_started_total")-value(before, "oxsupervise_sessions_started_total"), 1)
		check("api_requests_total{POST /sessions,200}", value(after, "oxsupervise_api_requests_total", "route=POST /sessions", "code=200")-
			value(before, "oxsupervise_api_requests_total", "route=POST /sessions", "code=200"), 1)
		check("sessions_live", value(after, "oxsupervise_sessions_live"), 0)
		check("events_lost_total", value(after, "oxsupervise_events_lost_total")-value(before, "oxsupervise_events_lost_total"), 0)
		if len(diffs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics disagree with the audit log after 30s:\n%s", strings.Join(diffs, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A bad metrics.listen in the managed policy fails the daemon's start with
// the file:line:col.
func TestDaemonMetricsBadListen(t *testing.T) {
	w := newWorld(t)
	file := filepath.Join(w.opts.ManagedDir, "policy.toml")
	writeFile(t, file, "[metrics]\nlisten = \"metrics.example.com:9464\"\n", 0)
	srv, err := New(w.opts)
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Serve(t.Context())
	if err == nil || !strings.Contains(err.Error(), file+":2:10") {
		t.Fatalf("Serve: %v, want the error at %s:2:10", err, file)
	}
	if _, statErr := os.Stat(w.socket); statErr == nil {
		t.Errorf("the socket %s is left behind", w.socket)
	}
}

// A daemon started without exporters (Options.Exporters: what the daemon
// program passes) refuses to start when the managed policy turns one on,
// naming the setting and where it was set, rather than serving no metrics.
func TestDaemonMetricsWithoutExporters(t *testing.T) {
	w := newWorld(t)
	file := filepath.Join(w.opts.ManagedDir, "policy.toml")
	writeFile(t, file, fmt.Sprintf("[metrics]\nlisten = %q\n", freePort(t)), 0)
	w.opts.Exporters = nil
	srv, err := New(w.opts)
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Serve(t.Context())
	if !errors.Is(err, errNoExporters) || !strings.Contains(err.Error(), "metrics.listen ("+file) {
		t.Fatalf("Serve: %v, want errNoExporters naming metrics.listen and %s", err, file)
	}
	if _, statErr := os.Stat(w.socket); statErr == nil {
		t.Errorf("the socket %s is left behind", w.socket)
	}
}
