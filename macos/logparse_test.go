package macos

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/policy"
)

// The fixture testdata/macos/logstream.ndjson is built by hand from the
// documented shape of `log stream --style ndjson` objects (field names as
// log(1) emits them) and the kernel's "Sandbox: NAME(PID) deny(N) OP TARGET"
// message; it was NOT captured on a Mac (none is available to this project).
func TestParseLogStreamFixture(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "testdata", "macos", "logstream.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Denial
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		d, ok, err := ParseLogLine(sc.Bytes())
		if err != nil {
			t.Fatalf("ParseLogLine(%.60q): %v", sc.Text(), err)
		}
		if ok {
			got = append(got, d)
		}
	}
	cet := time.FixedZone("", 3600)
	want := []Denial{
		{Time: time.Date(2026, 11, 30, 4, 1, 2, 345678000, cet), Process: "cat", PID: 4242, Count: 1, Operation: "file-read-data", Target: "/Users/dev/.ssh/id_ed25519"},
		{Time: time.Date(2026, 11, 30, 4, 1, 3, 1000, cet), Process: "bash", PID: 4243, Count: 1, Operation: "file-write-create", Target: "/Users/dev/src/app/.codex", Session: "s-20261130-abc123", Rule: "protected-13"},
		{Time: time.Date(2026, 11, 30, 4, 1, 4, 100000000, cet), Process: "Google Chrome Helper (Renderer)", PID: 5150, Count: 3, Operation: "file-write-data", Target: "/Users/dev/My Projects/a (1).txt"},
		{Time: time.Date(2026, 11, 30, 4, 1, 5, 0, cet), Process: "curl", PID: 4250, Count: 1, Operation: "network-outbound", Target: "140.82.121.4:443"},
		{Time: time.Date(2026, 11, 30, 4, 1, 6, 0, cet), Process: "ssh", PID: 4251, Count: 1, Operation: "network-outbound", Target: "/private/var/run/com.apple.launchd.XyZ/Listeners"},
		{Time: time.Date(2026, 11, 30, 4, 1, 7, 0, cet), Process: "node", PID: 4252, Count: 1, Operation: "mach-lookup", Target: "com.apple.coreservices.launchservicesd"},
		{Time: time.Date(2026, 11, 30, 4, 1, 9, 0, cet), Process: "bash", PID: 4253, Count: 1, Operation: "file-write-create", Target: "/Users/dev/src/app/x", Session: "other-session", Rule: "default"},
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %d denials, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) {
			t.Errorf("denial %d time %v, want %v", i, got[i].Time, want[i].Time)
		}
		got[i].Time, want[i].Time = time.Time{}, time.Time{}
		if got[i] != want[i] {
			t.Errorf("denial %d:\n got  %+v\n want %+v", i, got[i], want[i])
		}
	}
}

func TestParseLogLineRejectsBrokenJSON(t *testing.T) {
	_, ok, err := ParseLogLine([]byte(`{"eventMessage": "Sandbox: cat(1) deny(1)`))
	if err == nil || ok {
		t.Fatalf("truncated JSON: ok=%v err=%v, want an error", ok, err)
	}
	_, ok, err = ParseLogLine([]byte(`{"eventMessage":"Sandbox: x(1) deny(1) file-read-data /a","timestamp":"yesterday"}`))
	if err == nil || ok {
		t.Fatalf("bad timestamp: ok=%v err=%v, want an error", ok, err)
	}
}

func TestDenialRecord(t *testing.T) {
	tests := []struct {
		name   string
		d      Denial
		class  audit.Class
		action string
		check  func(t *testing.T, r *audit.Record)
	}{
		{name: "read", d: Denial{PID: 7, Process: "cat", Count: 1, Operation: "file-read-data", Target: "/Users/dev/.ssh/id_rsa", Rule: "deny-read-0"},
			class: audit.ClassFile, action: "open", check: func(t *testing.T, r *audit.Record) {
				if r.File == nil || r.File.Path != "/Users/dev/.ssh/id_rsa" {
					t.Errorf("file = %+v", r.File)
				}
				if r.Ox.Rule != "deny-read-0: denied read: /Users/dev/.ssh" {
					t.Errorf("rule = %q", r.Ox.Rule)
				}
			}},
		{name: "unlink", d: Denial{PID: 7, Operation: "file-write-unlink", Target: "/w/.git"}, class: audit.ClassFile, action: "unlink"},
		{name: "connect", d: Denial{PID: 8, Operation: "network-outbound", Target: "[2606:4700::1]:443"}, class: audit.ClassNetwork, action: "connect",
			check: func(t *testing.T, r *audit.Record) {
				if r.Destination == nil || r.Destination.Port != 443 || r.Destination.IP.String() != "2606:4700::1" {
					t.Errorf("destination = %+v", r.Destination)
				}
			}},
		{name: "unix socket", d: Denial{PID: 8, Operation: "network-outbound", Target: "/var/run/docker.sock"}, class: audit.ClassNetwork, action: "connect",
			check: func(t *testing.T, r *audit.Record) {
				if r.File == nil || r.File.Path != "/var/run/docker.sock" {
					t.Errorf("file = %+v", r.File)
				}
			}},
		{name: "mach", d: Denial{PID: 9, Operation: "mach-lookup", Target: "com.apple.x"}, class: audit.ClassSelfProtection, action: "mach-lookup"},
	}
	rules := map[string]string{"deny-read-0": "denied read: /Users/dev/.ssh"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.d.Record("s1", string(policy.ModeWorkspaceWrite), rules)
			r.Normalize()
			if err := r.Validate(); err != nil {
				t.Fatalf("record invalid: %v", err)
			}
			if r.Ox.Layer != audit.LayerSeatbelt || r.Ox.Session != "s1" || r.Ox.Class != tt.class || r.Event.Action != tt.action {
				t.Fatalf("record = %+v", r)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestTree(t *testing.T) {
	table := map[int]int{100: 1, 101: 100, 102: 101, 200: 1, 201: 200}
	tree := NewTree(100, func() (map[int]int, error) { return table, nil })
	tests := []struct {
		pid  int
		want bool
	}{{100, true}, {101, true}, {102, true}, {200, false}, {201, false}, {999, false}, {1, false}}
	for _, tt := range tests {
		got, err := tree.Contains(tt.pid)
		if err != nil || got != tt.want {
			t.Errorf("Contains(%d) = %v, %v; want %v", tt.pid, got, err, tt.want)
		}
	}
	// 102 was learned; it stays a member after it exits from the table.
	delete(table, 102)
	if ok, _ := tree.Contains(102); !ok {
		t.Error("a learned descendant was forgotten")
	}
	// Cycles in a corrupt table terminate.
	table[300], table[301] = 301, 300
	if ok, err := tree.Contains(300); ok || err != nil {
		t.Errorf("cycle: %v, %v", ok, err)
	}
	failing := NewTree(1, func() (map[int]int, error) { return nil, errors.New("boom") })
	if _, err := failing.Contains(5); err == nil {
		t.Error("table error not reported")
	}
	if ok, _ := tree.Belongs(Denial{PID: 101, Session: "other"}, "s1"); ok {
		t.Error("a denial tagged with another session was attributed to s1")
	}
	if ok, _ := tree.Belongs(Denial{PID: 4444, Session: "s1"}, "s1"); !ok {
		t.Error("a denial tagged with s1 was dropped")
	}
}

// TestProtectedRegexSemantics evaluates the profile's protected-entry
// regexes with Go's RE2 (a superset of the ERE subset used here) against
// paths that must and must not be protected.
func TestProtectedRegexSemantics(t *testing.T) {
	prof, err := Generate(workspaceWrite(), Options{SessionID: testSession})
	if err != nil {
		t.Fatal(err)
	}
	lit := regexp.MustCompile(`^\(deny file-write\* (?:\(require-all )?\(regex #"([^"]*)"\)`)
	var res []*regexp.Regexp
	for _, line := range strings.Split(prof.Text, "\n") {
		if m := lit.FindStringSubmatch(line); m != nil {
			res = append(res, regexp.MustCompile(m[1]))
		}
	}
	if len(res) < 10 {
		t.Fatalf("found %d protected regexes", len(res))
	}
	protected := func(p string) bool {
		for _, re := range res {
			if re.MatchString(p) {
				return true
			}
		}
		return false
	}
	for _, p := range []string{
		"/Users/dev/src/app/.codex", "/Users/dev/src/app/.codex/config.toml", "/Users/dev/src/app/deep/er/.claude/settings.json",
		"/Users/dev/src/app/.git/hooks/pre-commit", "/Users/dev/src/app/sub/.git/config", "/Users/dev/src/app/.git/modules/lib/hooks/x",
		"/Users/dev/src/app/.git/worktrees/wt/config", "/Users/dev/src/app/AGENTS.md", "/private/tmp/x/.mcp.json",
	} {
		if !protected(p) {
			t.Errorf("%s is not protected", p)
		}
	}
	for _, p := range []string{
		"/Users/dev/src/app/.git/objects/ab/cdef", "/Users/dev/src/app/.git/refs/heads/main", "/Users/dev/src/app/.git/index",
		"/Users/dev/src/app/.codexx", "/Users/dev/src/app/my.codex", "/Users/dev/src/app/AGENTS.md.bak", "/Users/dev/src/app/src/main.go",
		"/Users/dev/src/app/.gitignore",
	} {
		if protected(p) {
			t.Errorf("%s is protected but must stay writable", p)
		}
	}
}

// TestDenyReadGlobSemantics evaluates the .env* glob rule (include minus
// exclude, final component only) with Go's regexp.
func TestDenyReadGlobSemantics(t *testing.T) {
	prof, err := Generate(workspaceWrite(), Options{SessionID: testSession})
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`\(deny file-read\* file-write\* \(require-all \(subpath \(param "DENY_GLOB_WITHIN_0"\)\) \(regex #"([^"]*)"\) \(require-not \(regex #"([^"]*)"\)\)\)`)
	m := line.FindStringSubmatch(prof.Text)
	if m == nil {
		t.Fatal("deny-read glob rule not found")
	}
	inc, exc := regexp.MustCompile(m[1]), regexp.MustCompile(m[2])
	denied := func(p string) bool { return inc.MatchString(p) && !exc.MatchString(p) }
	for _, p := range []string{"/w/.env", "/w/.env.local", "/w/sub/.env.production"} {
		if !denied(p) {
			t.Errorf("%s readable", p)
		}
	}
	for _, p := range []string{"/w/.env.example", "/w/env", "/w/x.env", "/w/.envrc/x", "/w/src/main.go"} {
		if denied(p) {
			t.Errorf("%s denied", p)
		}
	}
}
