package agenthook

import (
	"bufio"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
)

// schemaExamples are the example records of docs/audit-schema.md, the
// documented shape of what every layer writes.
func schemaExamples(t *testing.T) []audit.Record {
	t.Helper()
	f, err := os.Open("../docs/audit-schema.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []audit.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), `{"@timestamp"`) {
			continue
		}
		r, err := audit.Decode(sc.Bytes())
		if err != nil {
			t.Fatalf("docs/audit-schema.md example %s: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	if len(out) < 5 {
		t.Fatalf("found %d example records in docs/audit-schema.md, want one per kind", len(out))
	}
	return out
}

func TestFormatRefusalSchemaExamples(t *testing.T) {
	// One expectation per denial example of the schema document, by the
	// thing refused; each line must also name the errno and the rule.
	want := map[string]string{
		"/etc/passwd":                "oxsupervise: refused open of /etc/passwd by bash (pid 4242): EACCES; rule: outside writable roots [bpf-lsm, session s-7f3a9c]",
		"open of /home/dev/.bashrc":  "oxsupervise: refused open of /home/dev/.bashrc by touch (pid 4243): EACCES; rule: writing is not allowed here (fs.write_file) [landlock, session s-7f3a9c]",
		"chmod of /home/dev/.bashrc": "oxsupervise: refused chmod of /home/dev/.bashrc by chmod (pid 4244): EROFS; rule: read-only outside the writable roots [read-only-view, session s-7f3a9c]",
		"169.254.169.254":            "oxsupervise: refused connect to tcp 169.254.169.254:80 by bash (pid 4242): EPERM; rule: cloud metadata [cgroup, session s-7f3a9c]",
		"exfil.example.net":          "oxsupervise: refused DNS lookup of exfil.example.net by curl (pid 4250): REFUSED; rule: not in network.allow [resolver, session s-7f3a9c]",
		"ptrace":                     "oxsupervise: refused ptrace by bash (pid 4242): EPERM; rule: target outside session [bpf-lsm, session s-7f3a9c]",
	}
	seen := map[string]bool{}
	for _, r := range schemaExamples(t) {
		line, ok := FormatRefusal(&r)
		if isRefusal := r.Ox.Kind == audit.KindDenial || r.Ox.Kind == audit.KindSuppressed || r.Ox.Kind == audit.KindEventsLost; ok != isRefusal {
			t.Errorf("%s record: ok = %t", r.Ox.Kind, ok)
		}
		if !ok {
			continue
		}
		if strings.Contains(line, "\n") {
			t.Errorf("line %q spans lines", line)
		}
		for key, w := range want {
			if strings.Contains(line, key) {
				seen[key] = true
				if line != w {
					t.Errorf("refusal of %s:\n got %s\nwant %s", key, line, w)
				}
			}
		}
	}
	for key := range want {
		if !seen[key] {
			t.Errorf("no schema example refuses %s any more: the expectations are stale", key)
		}
	}
}

func TestRefusalSummary(t *testing.T) {
	deny := func(session string, pid int, path string) audit.Record {
		return audit.Record{Event: audit.Event{Action: "open"}, Process: &audit.Process{PID: pid, Name: "sh"},
			File: &audit.File{Path: path}, Error: &audit.Error{Code: "EACCES"},
			Ox: audit.Ox{Kind: audit.KindDenial, Session: session, Layer: audit.LayerLandlock, Class: audit.ClassFile, Rule: "fs.make_reg,fs.write_file"}}
	}
	records := []audit.Record{
		{Ox: audit.Ox{Kind: audit.KindSessionStart, Session: "child"}},
		deny("child", 10, "/home/u/.claude/settings.json"),
		deny("parent", 11, "/etc/shadow"),
		deny("child", 12, "/home/u/.claude/settings.json"),
		{Event: audit.Event{Action: "connect"}, Destination: &audit.Destination{IP: netip.MustParseAddr("160.79.104.10"), Port: 443, Domain: "api.anthropic.com"},
			Ox: audit.Ox{Kind: audit.KindDenial, Session: "child", Layer: audit.LayerCgroupNet, Class: audit.ClassNetwork, Errno: 1, Rule: "not in network.allow"}},
		{Ox: audit.Ox{Kind: audit.KindSuppressed, Session: "child", Suppressed: 40}},
		{Ox: audit.Ox{Kind: audit.KindSessionStop, Session: "child"}},
	}
	got := RefusalSummary(records, "child")
	want := []string{
		"oxsupervise: refused open of /home/u/.claude/settings.json by sh: EACCES; rule: creating a file, writing is not allowed here (fs.make_reg,fs.write_file) [landlock, session child] (2 times)",
		"oxsupervise: refused connect to 160.79.104.10:443 (api.anthropic.com): EPERM; rule: not in network.allow [cgroup, session child]",
		"oxsupervise: 40 more refusals were not listed one by one (flood control)",
		RefusalHint,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("summary:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := RefusalSummary(records[:1], "child"); s != nil {
		t.Errorf("a session without refusals has a summary: %q", s)
	}
}
