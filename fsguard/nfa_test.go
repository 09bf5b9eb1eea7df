package fsguard

import (
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/policy"
)

var nfaTestPatterns = []policy.ProtectedPattern{
	{Components: []string{".git"}, Type: policy.EntryFile},
	{Components: []string{".git", "hooks"}, Type: policy.EntryAny},
	{Components: []string{".git", "modules", "*", "hooks"}, Type: policy.EntryAny},
	{Components: []string{".codex"}, Type: policy.EntryAny},
	{Components: []string{"build"}, Type: policy.EntryDir},
}

// naiveMatch is the definition the NFA implements: some run of
// consecutive components equals a pattern (with "*" for any one), the
// pattern's type fits the entry the run ends on, or, in prefix mode, the
// entry itself is any component of such a run.
func naiveMatch(ps []policy.ProtectedPattern, comps []string, leaf entryKind, prefix bool) []int {
	var out []int
	for pi, p := range ps {
		matched := false
		for end := 0; end < len(comps) && !matched; end++ {
			for last := len(p.Components) - 1; last >= 0 && !matched; last-- {
				if !prefix && last != len(p.Components)-1 {
					continue
				}
				if prefix && end != len(comps)-1 {
					if last != len(p.Components)-1 {
						continue
					}
				}
				start := end - last
				if start < 0 {
					continue
				}
				ok := true
				for j := 0; j <= last; j++ {
					if c := p.Components[j]; c != "*" && c != comps[start+j] {
						ok = false
					}
				}
				if ok && last == len(p.Components)-1 && !(prefix && end == len(comps)-1) {
					kind := entryDir
					if end == len(comps)-1 {
						kind = leaf
					}
					if p.Type == policy.EntryDir && kind == entryFile || p.Type == policy.EntryFile && kind == entryDir {
						ok = false
					}
				}
				matched = ok
			}
		}
		if matched {
			out = append(out, pi)
		}
	}
	return out
}

func TestNFAMatchesNaiveDefinition(t *testing.T) {
	n, err := compilePatterns(nfaTestPatterns)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{
		"a/b", ".git", ".git/hooks", ".git/hooks/pre-commit", "x/.git/hooks/h", ".git/HEAD", ".git/modules/m/hooks/x",
		".git/modules/m/x", "hooks", ".codex", "a/.codex/b", "build", "build/x", "sub/.git", ".git/x/hooks",
		"modules/m/hooks", ".git/modules/hooks",
	}
	for _, p := range paths {
		comps := strings.Split(p, "/")
		for _, leaf := range []entryKind{entryUnknown, entryDir, entryFile} {
			for _, prefix := range []bool{false, true} {
				got := n.patterns(n.match(comps, leaf, prefix))
				want := naiveMatch(nfaTestPatterns, comps, leaf, prefix)
				if !equalInts(got, want) {
					t.Errorf("match(%q, leaf %d, prefix %v) = patterns %v, want %v", p, leaf, prefix, got, want)
				}
			}
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCompilePatternsRejectsBadInput(t *testing.T) {
	long := strings.Repeat("x", 64)
	tests := []struct {
		name string
		p    []policy.ProtectedPattern
		want string
	}{
		{"empty", []policy.ProtectedPattern{{}}, "no components"},
		{"slash", []policy.ProtectedPattern{{Components: []string{"a/b"}}}, "not a file name"},
		{"dotdot", []policy.ProtectedPattern{{Components: []string{".."}}}, "not a file name"},
		{"long", []policy.ProtectedPattern{{Components: []string{long}}}, "longer than 63"},
		{"type", []policy.ProtectedPattern{{Components: []string{"a"}, Type: "socket"}}, "unknown entry type"},
		{"too many", []policy.ProtectedPattern{{Components: make([]string, 257)}}, "more than 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compilePatterns(tt.p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("compilePatterns = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
