package doctor

import (
	"strings"
	"testing"
)

// TestProtectedNamesGuarantee: doctor says which guarantee this kernel
// gives for protected names created during a session.
func TestProtectedNamesGuarantee(t *testing.T) {
	for _, tc := range []struct {
		name   string
		report Report
		want   []string
	}{
		{"bpf-lsm", synthetic(true, true, "", []string{"bpf"}, 7, "", true), []string{"refused by the kernel"}},
		{"landlock only", synthetic(true, false, "", []string{"capability", "landlock"}, 7, "", true),
			[]string{"NOT refused", "quarantine", "sandbox.require", "lsm=capability,landlock,bpf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range tc.want {
				if !strings.Contains(tc.report.Verdict.ProtectedNames, w) {
					t.Errorf("protected names %q lacks %q", tc.report.Verdict.ProtectedNames, w)
				}
			}
			var text strings.Builder
			if err := tc.report.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), tc.report.Verdict.ProtectedNames) {
				t.Errorf("text output lacks the protected-names line:\n%s", text.String())
			}
		})
	}
}
