package treescan

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// classify picks what the protected-entry scan would: .claude and .git
// directories, AGENTS.md files at any depth, .git files; it prunes
// node_modules.
func classify(rel []string, typ fs.FileMode) Verdict {
	name := rel[len(rel)-1]
	switch {
	case name == "node_modules":
		return Prune
	case name == ".claude" || name == ".git" || name == "AGENTS.md":
		return Pick
	}
	return Descend
}

// oracle is the package's classify scan done the plain way (oracleOf).
func oracle(t *testing.T, root string) []string {
	t.Helper()
	return oracleOf(t, root, classify)
}

func rels(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Rel
	}
	return out
}

func write(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f))
		if strings.HasSuffix(f, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tree makes a workspace with picks at several depths, a pruned subtree
// holding a name that would be picked, and plain files.
func tree(t *testing.T) string {
	root := t.TempDir()
	write(t, root,
		"README.md", "src/a.go", "src/b.go", "src/deep/er/c.go", "src/deep/er/AGENTS.md",
		".git/config", ".git/hooks/pre-commit", "sub/repo/.git", "docs/.claude/settings.json",
		"node_modules/pkg/AGENTS.md", "node_modules/pkg/index.js", "empty/",
	)
	if err := os.Symlink("/etc", filepath.Join(root, "src", "link")); err != nil {
		t.Fatal(err)
	}
	return root
}

func cacheDir(t *testing.T) string {
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// settle waits until the directories just made are older than the scan
// start by more than a clock tick, so that with RacyWindow -1 (zero) they
// are remembered.
func settle() { time.Sleep(30 * time.Millisecond) }

func TestScanMatchesWalk(t *testing.T) {
	root := tree(t)
	res, err := Scan(root, Options{Classify: classify})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rels(res.Picked), oracle(t, root); !slices.Equal(got, want) {
		t.Fatalf("picked %v, want %v", got, want)
	}
	if res.DirsCached != 0 || res.DirsRead == 0 {
		t.Fatalf("without a cache: read %d, cached %d", res.DirsRead, res.DirsCached)
	}
	for _, e := range res.Picked {
		if e.Path != filepath.Join(root, filepath.FromSlash(e.Rel)) {
			t.Fatalf("entry %+v: Path does not name Rel below the root", e)
		}
	}
}

// TestCachedScanSeesEveryChange remembers a tree, changes it the ways a
// session could (including setting a directory's times back), and checks
// that the next scan finds exactly what a full walk finds, reading only
// the directories that changed.
func TestCachedScanSeesEveryChange(t *testing.T) {
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		change   func(t *testing.T, root string)
		maxReads int // directories the second scan may read
	}{
		{"nothing", func(*testing.T, string) {}, 0},
		{"new pick in a deep directory", func(t *testing.T, root string) { write(t, root, "src/deep/AGENTS.md") }, 1},
		{"new pick, directory times set back", func(t *testing.T, root string) {
			write(t, root, "src/.claude/settings.json")
			if err := os.Chtimes(filepath.Join(root, "src"), old, old); err != nil {
				t.Fatal(err)
			}
		}, 2},
		{"pick moved in by rename", func(t *testing.T, root string) {
			write(t, root, "staging/settings.json")
			if err := os.Rename(filepath.Join(root, "staging"), filepath.Join(root, "empty", ".claude")); err != nil {
				t.Fatal(err)
			}
		}, 2},
		{"directory replaced by another holding a pick", func(t *testing.T, root string) {
			// A remembered directory's path now names another directory
			// (another inode): its record must not be used for it.
			write(t, root, "staging/c.go", "staging/vendored/.git/config")
			er := filepath.Join(root, "src/deep/er")
			if err := os.RemoveAll(er); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(root, "staging"), er); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(filepath.Join(root, "src/deep"), old, old); err != nil {
				t.Fatal(err)
			}
		}, 4},
		{"new subdirectory holding a pick", func(t *testing.T, root string) { write(t, root, "new/x/y/AGENTS.md") }, 4},
		{"pick removed", func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, "src/deep/er/AGENTS.md")); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"file replaced by a directory with a pick", func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, "src/a.go")); err != nil {
				t.Fatal(err)
			}
			write(t, root, "src/a.go/.git")
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, cache := tree(t), cacheDir(t)
			opts := Options{Classify: classify, Key: "k", CacheDir: cache, RacyWindow: -1}
			settle()
			first, err := Scan(root, opts)
			if err != nil {
				t.Fatal(err)
			}
			before := cacheFiles(t, cache)
			tc.change(t, root)
			settle()
			second, err := Scan(root, opts)
			if err != nil {
				t.Fatal(err)
			}
			// An unchanged tree leaves the cache file as it was (no
			// rewrite); after a change the next scan is cached in full.
			if after := cacheFiles(t, cache); tc.maxReads == 0 && !sameFiles(before, after) {
				t.Errorf("an unchanged tree rewrote the cache")
			}
			third, err := Scan(root, opts)
			if err != nil {
				t.Fatal(err)
			}
			if third.DirsRead != 0 || !slices.Equal(rels(third.Picked), rels(second.Picked)) {
				t.Errorf("a third scan of the same tree read %d directories and picked %v, want 0 and %v", third.DirsRead, rels(third.Picked), rels(second.Picked))
			}
			if got, want := rels(second.Picked), oracle(t, root); !slices.Equal(got, want) {
				t.Fatalf("after the change the cached scan picked %v, a full walk %v", got, want)
			}
			if second.DirsRead > tc.maxReads {
				t.Fatalf("second scan read %d directories (cached %d), want at most %d", second.DirsRead, second.DirsCached, tc.maxReads)
			}
			if second.DirsCached == 0 || second.DirsCached+second.DirsRead < first.DirsRead-1 {
				t.Fatalf("second scan: read %d, cached %d; first read %d", second.DirsRead, second.DirsCached, first.DirsRead)
			}
		})
	}
}

func TestCacheRefused(t *testing.T) {
	root := tree(t)
	settle()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) Options
		why   string // substring of CacheUnused; "" when the cache is used but must not be reused
	}{
		{"writable by others", func(t *testing.T) Options {
			d := t.TempDir()
			if err := os.Chmod(d, 0o777); err != nil {
				t.Fatal(err)
			}
			return Options{CacheDir: d}
		}, "only it may write"},
		{"missing", func(t *testing.T) Options { return Options{CacheDir: filepath.Join(t.TempDir(), "none")} }, "no such file"},
		{"a symlink", func(t *testing.T) Options {
			l := filepath.Join(t.TempDir(), "l")
			if err := os.Symlink(cacheDir(t), l); err != nil {
				t.Fatal(err)
			}
			return Options{CacheDir: l}
		}, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.setup(t)
			opts.Classify, opts.RacyWindow, opts.Key = classify, -1, "k"
			for range 2 {
				res, err := Scan(root, opts)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(res.CacheUnused, tc.why) || res.DirsCached != 0 {
					t.Fatalf("CacheUnused %q (want it to say %q), cached %d", res.CacheUnused, tc.why, res.DirsCached)
				}
			}
		})
	}
}

func TestCacheNotReusedAcrossKeysOrRacy(t *testing.T) {
	root, cache := tree(t), cacheDir(t)
	settle()
	if _, err := Scan(root, Options{Classify: classify, Key: "a", CacheDir: cache, RacyWindow: -1}); err != nil {
		t.Fatal(err)
	}
	res, err := Scan(root, Options{Classify: classify, Key: "b", CacheDir: cache, RacyWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.DirsCached != 0 {
		t.Fatalf("a cache written under key a was used under key b (%d directories)", res.DirsCached)
	}
	// With the default window, directories changed within the last second
	// are not remembered.
	fresh, cache2 := tree(t), cacheDir(t)
	for range 2 {
		res, err := Scan(fresh, Options{Classify: classify, Key: "a", CacheDir: cache2})
		if err != nil {
			t.Fatal(err)
		}
		if res.DirsCached != 0 {
			t.Fatalf("directories changed %v ago were remembered", DefaultRacyWindow)
		}
	}
}

func TestLimit(t *testing.T) {
	root := tree(t)
	res, err := Scan(root, Options{Classify: classify, Limit: 3})
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("err = %v, want ErrLimit", err)
	}
	if res.Entries > 3 {
		t.Fatalf("considered %d entries past a limit of 3", res.Entries)
	}
	if _, err := Scan(filepath.Join(root, "README.md"), Options{Classify: classify}); err == nil {
		t.Fatal("a file as root: no error")
	}
}

// BenchmarkScan is a 100 000-file workspace (directories of 100) scanned
// without a cache and with one from an earlier start.
func BenchmarkScan(b *testing.B) {
	root := b.TempDir()
	for i := range 100_000 {
		sub := filepath.Join(root, "d"+strconv.Itoa(i/1000), "e"+strconv.Itoa((i/100)%10))
		if i%100 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sub, "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(30 * time.Millisecond)
	cache := b.TempDir()
	os.Chmod(cache, 0o700)
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"walk", Options{Classify: classify}},
		{"cached", Options{Classify: classify, Key: "k", CacheDir: cache, RacyWindow: -1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if _, err := Scan(root, bc.opts); err != nil { // fills the cache
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				res, err := Scan(root, bc.opts)
				if err != nil || res.Entries != 100_000+1000+100 {
					b.Fatalf("entries %d, err %v", res.Entries, err)
				}
			}
		})
	}
}

// cacheFiles lists the cache files in dir (a rewrite renames a new file
// into place, which os.SameFile tells apart).
func cacheFiles(t *testing.T, dir string) []fs.FileInfo {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []fs.FileInfo
	for _, e := range ents {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fi)
	}
	return out
}

// sameFiles reports whether a and b are the same files.
func sameFiles(a, b []fs.FileInfo) bool {
	return slices.EqualFunc(a, b, os.SameFile)
}
