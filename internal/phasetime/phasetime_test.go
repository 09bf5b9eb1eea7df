package phasetime

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestRecorder(t *testing.T) {
	var nilRec *Recorder
	nilRec.Mark("nothing") // a nil Recorder records nothing and does not panic
	if FromEnv("", &bytes.Buffer{}) != nil {
		t.Fatal("FromEnv with the variable unset returned a Recorder")
	}
	var out bytes.Buffer
	r := FromEnv("1", &out)
	for _, p := range []string{"policy", "host: network", "exec"} {
		r.Mark(p)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out.String())
	}
	re := regexp.MustCompile(`^oxsupervise: timing: (.+?)\s+(\d+\.\d{3}) ms  \(at\s+(\d+\.\d{3}) ms\)$`)
	for i, want := range []string{"policy", "host: network", "exec"} {
		m := re.FindStringSubmatch(lines[i])
		if m == nil || m[1] != want {
			t.Errorf("line %d %q, want phase %q in the timing format", i, lines[i], want)
		}
	}
}
