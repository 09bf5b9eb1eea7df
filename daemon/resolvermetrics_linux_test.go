//go:build linux

package daemon

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/openoxide/oxsupervise/audit"
)

// A daemon with [metrics] listen whose session (a network allowlist of
// three names, answered by a DNS upstream the test serves on loopback)
// makes lookups the resolver answers and lookups it refuses:
// oxsupervise_resolver_answers_total moves by exactly the answered ones,
// by result, and the resolver's refusal counters by exactly the refused
// ones, which the audit log records one by one (answers leave no record).
// No looked-up name appears in the metrics. Each lookup is followed by a
// connect to an address no answer admits (EPERM): the cgroup refusals are
// counted too.
func TestDaemonResolverMetrics(t *testing.T) {
	w := newWorld(t)
	requireSockAddr(t, w)
	upstream, err := serveFakeDNS(map[string]string{"one.metrics.test": "198.19.0.2", "two.metrics.test": "198.19.0.3"})
	if err != nil {
		t.Fatalf("fake DNS upstream on loopback: %v", err)
	}
	w.opts.ResolverUpstream = []string{upstream}
	addr := freePort(t)
	writeFile(t, filepath.Join(w.opts.ManagedDir, "policy.toml"), fmt.Sprintf("[metrics]\nlisten = %q\n", addr), 0)
	w.start(t)
	if strings.Contains(w.log.String(), "cgroup network layer NOT built") {
		t.Fatalf("the probe attaches sock_addr programs but the daemon did not build its network layer:\n%s", w.log.String())
	}
	before, _ := scrape(t, addr)

	lookups := []struct{ name, rcode, answer string }{
		{"one.metrics.test", "NOERROR", "198.19.0.2"},
		{"two.metrics.test", "NOERROR", "198.19.0.3"},
		{"one.metrics.test", "NOERROR", "198.19.0.2"},
		{"gone.metrics.test", "NXDOMAIN", ""}, // allowed, unknown upstream
		{"three.metrics.test", "REFUSED", ""}, // not in the allowlist
		{"evil.example.test", "REFUSED", ""},
	}
	const addresses, nxdomain, refused = 3, 1, 2
	var script strings.Builder
	for _, l := range lookups {
		// Any server on port 53: the session's DNS goes to its resolver.
		script.WriteString(helper + " " + lookupVerb + " " + l.name + " 198.18.0.3:53 " + otherAddr + "; ")
	}
	script.WriteString("true")
	res := w.runHelper(t, nobody, w.ws, nil, "netrun", w.ws, "allowlist", "one.metrics.test,two.metrics.test,gone.metrics.test",
		"sh", "-c", script.String())
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
	}
	wantLines := map[string]int{}
	for _, l := range lookups {
		wantLines[l.name+" rcode="+l.rcode+" answer="+l.answer+" "+otherAddr+"=EPERM\n"]++
	}
	for line, n := range wantLines {
		if got := strings.Count(res.stdout, line); got != n {
			t.Errorf("stdout has %q %d times, want %d", line, got, n)
		}
	}
	if t.Failed() {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	}

	// The refusals, as the audit log has them.
	recs := readRecords(t, w.audit)
	ids := startedSessions(recs)
	if len(ids) != 1 {
		t.Fatalf("session_start records %v, want 1", ids)
	}
	var refusedNames []string
	connects := 0
	for _, r := range recs {
		if r.Ox.Kind != audit.KindDenial || r.Ox.Session != ids[0] {
			continue
		}
		switch r.Ox.Layer {
		case audit.LayerResolver:
			if r.DNS == nil || r.Event.Reason != "not-allowed" {
				t.Errorf("resolver refusal %+v, want a not-allowed dns record", r)
				continue
			}
			refusedNames = append(refusedNames, r.DNS.Question.Name)
		case audit.LayerCgroupNet:
			connects++
		default:
			t.Errorf("unexpected refusal of layer %s: %s", r.Ox.Layer, r.Message)
		}
	}
	slices.Sort(refusedNames)
	if !slices.Equal(refusedNames, []string{"evil.example.test", "three.metrics.test"}) || connects != len(lookups) {
		t.Fatalf("audit log: resolver refusals of %v and %d connect refusals, want evil.example.test, three.metrics.test and %d",
			refusedNames, connects, len(lookups))
	}

	// The answers are counted as they are sent, the refusals as the daemon
	// reads the log back: wait for the log's (a liveness bound, not a
	// speed assertion).
	deadline := time.Now().Add(30 * time.Second)
	for {
		after, body := scrape(t, addr)
		var diffs []string
		check := func(what string, got, want float64) {
			if got != want {
				diffs = append(diffs, fmt.Sprintf("%s moved by %v, want %v", what, got, want))
			}
		}
		delta := func(name string, labels ...string) float64 {
			return value(after, name, labels...) - value(before, name, labels...)
		}
		check("resolver_answers_total{result=addresses}", delta("oxsupervise_resolver_answers_total", "result=addresses"), addresses)
		check("resolver_answers_total{result=nxdomain}", delta("oxsupervise_resolver_answers_total", "result=nxdomain"), nxdomain)
		check("resolver_answers_total", delta("oxsupervise_resolver_answers_total"), addresses+nxdomain)
		check("resolver_refusals_total", delta("oxsupervise_resolver_refusals_total"), refused)
		check("refusals_total{layer=resolver,operation=dns}", delta("oxsupervise_refusals_total", "layer=resolver", "operation=dns"), refused)
		check("refusals_total{layer=cgroup}", delta("oxsupervise_refusals_total", "layer=cgroup"), float64(connects))
		check("refusals_total", delta("oxsupervise_refusals_total"), float64(refused+connects))
		if len(diffs) == 0 {
			// The answers' one label is their closed result set; no
			// looked-up name is a label anywhere.
			for _, m := range after["oxsupervise_resolver_answers_total"].GetMetric() {
				if len(m.Label) != 1 || m.Label[0].GetName() != "result" ||
					!slices.Contains([]string{"addresses", "nodata", "nxdomain"}, m.Label[0].GetValue()) {
					t.Errorf("resolver_answers_total series with labels %v", m.Label)
				}
			}
			if bytes.Contains(body, []byte("metrics.test")) || bytes.Contains(body, []byte("example.test")) {
				t.Errorf("a looked-up name is in the metrics:\n%s", body)
			}
			problems, err := promlint.New(bytes.NewReader(body)).Lint()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics disagree with the session's lookups after 30s:\n%s", strings.Join(diffs, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
