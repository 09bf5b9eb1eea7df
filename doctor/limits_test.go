package doctor

import (
	"strings"
	"testing"
)

// TestLimits: doctor states what the layers it found cannot hold, each
// statement following from the probes: the filesystem layer, the
// Landlock ABI and BPF-LSM.
func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		report Report
		want   map[string][]string // subject -> status, then words of its detail
		absent []string            // subjects that must not be stated
	}{
		{"landlock ABI 7, no bpf-lsm", synthetic(true, false, "EPERM", []string{"capability", "landlock", "bpf"}, 7, "", true),
			map[string][]string{
				"pathname unix sockets": {"NOT refused", "Landlock (ABI 7) has no right for connect(2)", "hides only the well-known ones", "network.allow_unix_sockets"},
				"abstract unix sockets": {"scoped", "Landlock ABI 7 scopes them"},
				"attach":                {"refused without bpf-lsm", "exit 125", "--network-only", "external-sandbox and full-access", "EPERM"},
			}, nil},
		{"landlock ABI 5, bpf not listed", synthetic(true, false, "", []string{"capability", "landlock"}, 5, "", true),
			map[string][]string{
				"pathname unix sockets": {"NOT refused", "ABI 5"},
				"abstract unix sockets": {"NOT refused", "from ABI 6", "ABI 5 here"},
				"attach":                {"refused without bpf-lsm", "--network-only", "lsm=capability,landlock,bpf"},
			}, nil},
		{"bpf-lsm", synthetic(true, true, "", []string{"capability", "landlock", "bpf"}, 7, "", true),
			map[string][]string{
				"pathname unix sockets": {"refused outside the roots", "BPF-LSM judges connect(2) and sendto(2)", "EACCES", "network.allow_unix_sockets"},
				"abstract unix sockets": {"refused outside the session", "judges the peer", "EPERM", "whatever the Landlock ABI"},
				"attach":                {"filesystem rules held", "BPF-LSM holds a running process"},
			}, nil},
		{"no filesystem layer", synthetic(true, false, "", []string{"capability", "landlock"}, 2, "", true),
			map[string][]string{"attach": {"refused without bpf-lsm"}},
			[]string{"pathname unix sockets", "abstract unix sockets"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]Limit{}
			for _, l := range tc.report.Verdict.Limits {
				got[l.Subject] = l
			}
			for subject, want := range tc.want {
				l, ok := got[subject]
				if !ok {
					t.Errorf("no limit stated for %s: %+v", subject, tc.report.Verdict.Limits)
					continue
				}
				if l.Status != want[0] || l.Holds != holds(want[0]) {
					t.Errorf("%s: status %q holds %v, want %q", subject, l.Status, l.Holds, want[0])
				}
				for _, w := range want[1:] {
					if !strings.Contains(l.Detail, w) {
						t.Errorf("%s: detail %q lacks %q", subject, l.Detail, w)
					}
				}
			}
			for _, subject := range tc.absent {
				if l, ok := got[subject]; ok {
					t.Errorf("%s stated although the probes do not say it: %+v", subject, l)
				}
			}
			var text strings.Builder
			if err := tc.report.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.report.Verdict.Limits {
				if !strings.Contains(text.String(), l.Detail) {
					t.Errorf("text output lacks the %s limit:\n%s", l.Subject, text.String())
				}
			}
		})
	}
}

// holds is whether a limit of this status says the rule is enforced.
func holds(status string) bool {
	return !strings.HasPrefix(status, "NOT") && !strings.HasSuffix(status, "without bpf-lsm")
}
