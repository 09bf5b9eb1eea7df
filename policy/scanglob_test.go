package policy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/treescan"
)

// TestBindAnswersDenyReadGlobs: the bind step's walk of the workspace
// finds the deny-read glob's existing entries, exactly what a walk of the
// glob's own finds, also after a matching file is created in a remembered
// directory whose times are then set back; a copy of the policy made for
// another session, and a policy whose bind did not walk, have none.
func TestBindAnswersDenyReadGlobs(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"ws/.env", "ws/.env.example", "ws/sub/.env.local", "ws/.git/.env", "ws/.claude/.env", "ws/sub/deep/main.go"} {
		f.write(t, p, "x")
	}
	if err := os.Symlink(filepath.Join(f.ws, ".env"), filepath.Join(f.ws, "sub", ".env.link")); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(f.root, "cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	load := func(t *testing.T, mode string, withCache bool) *Compiled {
		t.Helper()
		opts := LoadOptions{ManagedDir: f.managed, Home: f.home, Workspace: f.ws, Env: func(string) string { return "" }, Flags: &Flags{Sandbox: mode}}
		if withCache {
			opts.ScanCache = cache
		}
		c, _, err := Load(opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	bound := func(t *testing.T, c *Compiled) []string {
		t.Helper()
		if len(c.DenyReadGlobs) != 1 {
			t.Fatalf("deny-read globs %v, want the default one", c.DenyReadGlobs)
		}
		g := c.DenyReadGlobs[0]
		got, ok := c.BoundGlobMatches(g)
		if !ok {
			t.Fatalf("the bind step did not answer %+v", g)
		}
		alone, err := ScanGlob(g, MaxGlobWalk, "")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, alone) {
			t.Fatalf("bound matches %v, a walk of the glob's own %v", got, alone)
		}
		return got
	}
	in := func(rels ...string) []string {
		var out []string
		for _, r := range rels {
			out = append(out, filepath.Join(f.ws, r))
		}
		return out
	}
	// Past treescan's racy window, so the first bind is remembered.
	time.Sleep(treescan.DefaultRacyWindow + 100*time.Millisecond)
	c := load(t, "workspace-write", true)
	if got, want := bound(t, c), in(".claude/.env", ".env", "sub/.env.local"); !slices.Equal(got, want) {
		t.Fatalf("first bind: %v, want %v", got, want)
	}
	f.write(t, "ws/sub/deep/.env.new", "x")
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(f.ws, "sub", "deep"), old, old); err != nil {
		t.Fatal(err)
	}
	again := load(t, "workspace-write", true)
	if got, want := bound(t, again), in(".claude/.env", ".env", "sub/.env.local", "sub/deep/.env.new"); !slices.Equal(got, want) {
		t.Fatalf("cached bind after a new .env: %v, want %v", got, want)
	}
	if got := bound(t, load(t, "workspace-write", false)); !slices.Equal(got, in(".claude/.env", ".env", "sub/.env.local", "sub/deep/.env.new")) {
		t.Fatalf("bind without a cache: %v", got)
	}
	g := again.DenyReadGlobs[0]
	tightened, err := Tighten(again, again)
	if err != nil {
		t.Fatal(err)
	}
	other := g
	other.Within = f.home
	for name, tc := range map[string]struct {
		c *Compiled
		g NameGlob
	}{
		"a tightened copy":             {tightened, g},
		"a glob the bind did not walk": {again, other},
		"a read-only bind (no walk)":   {load(t, "read-only", true), g},
	} {
		if m, ok := tc.c.BoundGlobMatches(tc.g); ok {
			t.Errorf("%s: bound matches %v, want none (the caller walks)", name, m)
		}
	}
}
