package session

import (
	"path"
	"testing"
)

// globMatch is path.Match for every pattern and name, the shapes it
// matches by string search and those it hands to path.Match alike.
func TestGlobMatchIsPathMatch(t *testing.T) {
	patterns := []string{"", "*", "**", "TOKEN", "AWS_*", "*_TOKEN", "*SECRET*", "*_*_*", "A*B*C", "AB*BA", "*A*A*",
		"GH_?OKEN", "[A-Z]*", `A\*B`, "a/*", "*/b", "AWS_*_KEY*"}
	names := []string{"", "TOKEN", "AWS_", "AWS_SECRET_ACCESS_KEY", "MY_TOKEN", "TOKENS", "X_SECRET_Y", "SECRET",
		"A_B_C", "ABC", "AXBXC", "ABBA", "ABA", "AA", "A", "GH_TOKEN", "a/b", "a/x/b", "A*B", "AWS_X_KEY", "AWS__KEY"}
	for _, p := range patterns {
		for _, n := range names {
			want, _ := path.Match(p, n)
			if got := globMatch(p, n); got != want {
				t.Errorf("globMatch(%q, %q) = %v, path.Match says %v", p, n, got, want)
			}
		}
	}
}
