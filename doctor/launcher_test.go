package doctor

import (
	"bytes"
	"strings"
	"testing"
)

// TestLauncherLine: the launcher program installed is an ok line; none
// installed a warning that sessions re-execute oxsupervise (the verdict
// holds); one failing its check fails the verdict, since run then refuses
// every session.
func TestLauncherLine(t *testing.T) {
	for _, tc := range []struct {
		name      string
		probe     Probe
		path      string
		verdictOK bool
		line      string
	}{
		{"installed", Probe{OK: true}, "/usr/libexec/oxsupervise/oxsupervise-launch", true, "launcher  ok  /usr/libexec/oxsupervise/oxsupervise-launch"},
		{"not installed", Probe{OK: true}, "", true, "launcher  WARN  no oxsupervise-launch installed beside oxsupervise"},
		{"fails its check", Probe{Error: "/usr/libexec/oxsupervise/oxsupervise-launch: writable by its group or by others (mode 0775)"}, "", false,
			"launcher  FAIL  /usr/libexec/oxsupervise/oxsupervise-launch: writable by its group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := synthetic(true, true, "", []string{"landlock", "bpf"}, 7, "", true)
			r.Launcher.Probe, r.Launcher.Path = tc.probe, tc.path
			r.decide()
			if r.Verdict.OK != tc.verdictOK {
				t.Errorf("verdict ok = %v, want %v (%s)", r.Verdict.OK, tc.verdictOK, r.Verdict.Summary)
			}
			if !tc.verdictOK && !strings.Contains(r.Verdict.Summary, "session launcher") {
				t.Errorf("verdict summary %q does not name the launcher", r.Verdict.Summary)
			}
			var out bytes.Buffer
			if err := r.WriteText(&out); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, l := range strings.Split(out.String(), "\n") {
				// Columns aligned by spaces: compare words.
				if strings.HasPrefix(strings.Join(strings.Fields(l), " "), strings.Join(strings.Fields(tc.line), " ")) {
					found = true
				}
			}
			if !found {
				t.Errorf("no line %q in:\n%s", tc.line, out.String())
			}
		})
	}
}
