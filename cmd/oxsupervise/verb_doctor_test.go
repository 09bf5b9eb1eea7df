package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/doctor"
)

func TestDoctorVerb(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int // -1: whatever the verdict says
		check    func(t *testing.T, stdout, stderr string)
	}{
		{name: "help", args: []string{"--help"}, wantCode: exitOK, check: func(t *testing.T, _, stderr string) {
			if !strings.Contains(stderr, "--json") {
				t.Errorf("help lacks --json:\n%s", stderr)
			}
		}},
		{name: "bad flag", args: []string{"--bogus"}, wantCode: exitUsage},
		{name: "extra argument", args: []string{"now"}, wantCode: exitUsage, check: func(t *testing.T, _, stderr string) {
			if !strings.Contains(stderr, `"now"`) {
				t.Errorf("error does not name the argument: %q", stderr)
			}
		}},
		{name: "json", args: []string{"--json"}, wantCode: -1, check: func(t *testing.T, stdout, _ string) {
			var r doctor.Report
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatalf("--json output is not a report: %v\n%s", err, stdout)
			}
			if r.SchemaVersion != doctor.SchemaVersion || r.OS != runtime.GOOS || len(r.Layers) != 4 || len(r.Modes) != 4 {
				t.Errorf("report: schema %d os %q, %d layers, %d modes", r.SchemaVersion, r.OS, len(r.Layers), len(r.Modes))
			}
		}},
		{name: "text", args: nil, wantCode: -1, check: func(t *testing.T, stdout, _ string) {
			for _, want := range []string{"kernel", "bpf-lsm", "landlock", "cgroup2", "cgroup sock_addr", "audit", "verdict"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("text output lacks %q:\n%s", want, stdout)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := cmdDoctor(context.Background(), streams{strings.NewReader(""), &out, &errOut}, tt.args)
			want := tt.wantCode
			if want == -1 {
				// The exit code follows the verdict of an independent run.
				want = exitFail
				if doctor.Run(context.Background()).Verdict.OK {
					want = exitOK
				}
			}
			if code != want {
				t.Errorf("doctor %v exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.args, code, want, out.String(), errOut.String())
			}
			if tt.check != nil {
				tt.check(t, out.String(), errOut.String())
			}
		})
	}
}
