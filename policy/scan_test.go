package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/treescan"
)

// TestScanCacheSeesNewProtectedEntries binds a workspace twice with a scan
// cache, creating protected entries in between the way a session could
// (in a remembered directory whose times are then set back, by rename,
// in a new subdirectory): every one is among the second bind's protected
// paths, exactly as a bind without a cache finds them.
func TestScanCacheSeesNewProtectedEntries(t *testing.T) {
	f := newFixture(t)
	f.write(t, "ws/src/deep/main.go", "package main")
	f.write(t, "ws/src/deep/AGENTS.md", "x")
	f.write(t, "ws/docs/readme.md", "x")
	cache := filepath.Join(f.root, "cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	bind := func(withCache bool) []string {
		t.Helper()
		opts := LoadOptions{ManagedDir: f.managed, Home: f.home, Workspace: f.ws, Env: func(string) string { return "" }}
		if withCache {
			opts.ScanCache = cache
		}
		c, _, err := Load(opts)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range c.ProtectedPaths {
			out = append(out, a.Path)
		}
		slices.Sort(out)
		return out
	}
	// Directories changed within treescan's racy window are not
	// remembered; wait it out once so the first bind fills the cache.
	time.Sleep(treescan.DefaultRacyWindow + 100*time.Millisecond)
	first := bind(true)
	if !slices.Contains(first, filepath.Join(f.ws, "src/deep/AGENTS.md")) {
		t.Fatalf("first bind missed the existing AGENTS.md: %v", first)
	}
	scanFiles := func() []string {
		m, _ := filepath.Glob(filepath.Join(cache, "*.scan"))
		return m
	}
	written := scanFiles()
	if len(written) != 1 {
		t.Fatalf("the first bind left %d scan caches in %s, want 1", len(written), cache)
	}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	f.write(t, "ws/src/deep/.mcp.json", "{}")
	if err := os.Chtimes(filepath.Join(f.ws, "src/deep"), old, old); err != nil {
		t.Fatal(err)
	}
	f.write(t, "ws/staging/settings.json", "{}")
	if err := os.Rename(filepath.Join(f.ws, "staging"), filepath.Join(f.ws, "docs/.claude")); err != nil {
		t.Fatal(err)
	}
	f.write(t, "ws/new/sub/CLAUDE.md", "x")
	cached, full := bind(true), bind(false)
	for _, want := range []string{"src/deep/.mcp.json", "docs/.claude", "new/sub/CLAUDE.md", "src/deep/AGENTS.md"} {
		if !slices.Contains(cached, filepath.Join(f.ws, want)) {
			t.Errorf("cached bind misses %s: %v", want, cached)
		}
	}
	if got := scanFiles(); !slices.Equal(got, written) {
		t.Fatalf("scan caches after the second bind: %v, want the first one reused: %v", got, written)
	}
	if !slices.Equal(cached, full) {
		t.Fatalf("cached bind found %v, a bind without the cache %v", cached, full)
	}
}

// TestUnboundIsNoBoundary: the policy before Bind has the resolve step's
// decisions (mode, network, audit) and no filesystem anchor, is marked
// incomplete, and does not change while Bind runs, however often.
func TestUnboundIsNoBoundary(t *testing.T) {
	f := newFixture(t)
	f.write(t, "ws/.claude/settings.json", "{}")
	r, _, err := Resolve(LoadOptions{ManagedDir: f.managed, Home: f.home, Workspace: f.ws, Env: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	u := r.Unbound()
	if len(u.WritableRoots) != 0 || len(u.ProtectedPaths) != 0 || len(u.DenyRead) != 0 || u.ProtectedPathsComplete {
		t.Fatalf("unbound policy has anchors (roots %v, protected %v, deny %v) or claims a complete scan (%v)", u.WritableRoots, u.ProtectedPaths, u.DenyRead, u.ProtectedPathsComplete)
	}
	before, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		c, err := r.Bind()
		if err != nil {
			t.Fatal(err)
		}
		if c.Mode != u.Mode || c.FilesystemRules != u.FilesystemRules || c.Audit != u.Audit || c.Network.Policy != u.Network.Policy {
			t.Fatalf("bind %d: mode %s, rules %v, audit %+v, network %s; unbound %s, %v, %+v, %s", i, c.Mode, c.FilesystemRules, c.Audit, c.Network.Policy, u.Mode, u.FilesystemRules, u.Audit, u.Network.Policy)
		}
		if len(c.ProtectedPaths) == 0 {
			t.Fatalf("bind %d found no protected entry", i)
		}
		after, err := json.Marshal(r.Unbound())
		if err != nil {
			t.Fatal(err)
		}
		if string(after) != string(before) {
			t.Fatalf("bind %d changed the resolved policy:\n%s\nwas\n%s", i, after, before)
		}
	}
}
