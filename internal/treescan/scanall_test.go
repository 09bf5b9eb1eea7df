package treescan

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// globClassify picks what the deny-read glob .env* (except .env.example)
// would: it prunes .git and descends into everything else, .claude
// included, so it disagrees with classify about which directories to
// walk.
func globClassify(rel []string, typ fs.FileMode) Verdict {
	name := rel[len(rel)-1]
	switch {
	case typ == fs.ModeDir && name == ".git":
		return Prune
	case typ == fs.ModeSymlink || name == ".env.example":
		return Descend
	case strings.HasPrefix(name, ".env"):
		return Pick
	}
	return Descend
}

// oracleOf is cl's scan done the plain way: filepath.WalkDir over every
// entry, independently of the code under test.
func oracleOf(t *testing.T, root string, cl Classifier) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch cl(strings.Split(filepath.ToSlash(rel), "/"), d.Type()&fs.ModeType) {
		case Pick:
			out = append(out, filepath.ToSlash(rel))
			if d.IsDir() {
				return fs.SkipDir
			}
		case Prune:
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// wideTree is tree with .env files where the two questions disagree
// about descending, and, when padded, enough directories that a cached
// scan prefetches their lookups.
func wideTree(t *testing.T, padded bool) string {
	root := tree(t)
	write(t, root, ".env", ".env.example", "docs/.claude/.env", ".git/.env", "node_modules/.env", "src/deep/.env.local")
	if padded {
		for i := range minPrefetch + 20 {
			write(t, root, fmt.Sprintf("pad/p%02d/q%d/", i/10, i%10))
		}
	}
	return root
}

// TestScanAllAnswersEachQuestion: one cached walk for two questions that
// disagree about where to descend answers each exactly as a full walk of
// its own does, before and after the tree changes under the cache (with
// the lookups prefetched or not).
func TestScanAllAnswersEachQuestion(t *testing.T) {
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	setBack := func(t *testing.T, dir string) {
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, root string)
	}{
		{"nothing", func(*testing.T, string) {}},
		{"new picks in remembered directories, times set back", func(t *testing.T, root string) {
			write(t, root, "src/deep/er/.env", "src/deep/er/CLAUDE.md/", "pad/p03/q4/.claude/x")
			setBack(t, filepath.Join(root, "src/deep/er"))
			if _, err := os.Stat(filepath.Join(root, "pad")); err == nil {
				setBack(t, filepath.Join(root, "pad/p03/q4"))
			}
		}},
		{"new pick inside a picked directory", func(t *testing.T, root string) {
			write(t, root, "docs/.claude/sub/.env.prod")
			setBack(t, filepath.Join(root, "docs/.claude"))
		}},
		{"directory swapped for another by rename", func(t *testing.T, root string) {
			write(t, root, "staging/.env", "staging/AGENTS.md")
			if err := os.Rename(filepath.Join(root, "src/deep"), filepath.Join(root, "gone")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(root, "staging"), filepath.Join(root, "src/deep")); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory replaced by a symlink", func(t *testing.T, root string) {
			if err := os.RemoveAll(filepath.Join(root, "src/deep")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(root, "docs"), filepath.Join(root, "src/deep")); err != nil {
				t.Fatal(err)
			}
		}},
		{"picks removed", func(t *testing.T, root string) {
			for _, f := range []string{".env", "docs/.claude"} {
				if err := os.RemoveAll(filepath.Join(root, f)); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		for _, padded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/padded=%v", tc.name, padded), func(t *testing.T) {
				root, cache := wideTree(t, padded), cacheDir(t)
				qs := []Question{{Classify: classify}, {Classify: globClassify}}
				opts := Options{Key: "both", CacheDir: cache, RacyWindow: -1}
				check := func(when string, wantCached bool) {
					t.Helper()
					res, answers, err := ScanAll(root, qs, opts)
					if err != nil {
						t.Fatal(err)
					}
					for i, q := range qs {
						alone, err := Scan(root, Options{Classify: q.Classify})
						if err != nil || answers[i].Err != nil {
							t.Fatalf("%s: question %d: %v, alone %v", when, i, answers[i].Err, err)
						}
						got, want := rels(answers[i].Picked), oracleOf(t, root, q.Classify)
						if !slices.Equal(got, want) || !slices.Equal(rels(alone.Picked), want) {
							t.Fatalf("%s: question %d picked %v (alone %v), a full walk %v", when, i, got, rels(alone.Picked), want)
						}
						if answers[i].Entries != alone.Entries {
							t.Errorf("%s: question %d considered %d entries, alone %d", when, i, answers[i].Entries, alone.Entries)
						}
					}
					if wantCached && res.DirsCached == 0 {
						t.Errorf("%s: nothing came from the cache (read %d)", when, res.DirsRead)
					}
					if wantCached && padded && res.DirsPrefetched < minPrefetch {
						t.Errorf("%s: %d directories prefetched, want at least %d", when, res.DirsPrefetched, minPrefetch)
					}
				}
				settle()
				check("first", false)
				check("unchanged", true)
				tc.change(t, root)
				settle()
				check("after the change", true)
				check("once more", true)
			})
		}
	}
}

// TestScanAllLimitPerQuestion: a question that reaches its limit ends
// alone, with what a Scan of its own under that limit returns; the other
// question's answer is complete.
func TestScanAllLimitPerQuestion(t *testing.T) {
	root := wideTree(t, false)
	_, answers, err := ScanAll(root, []Question{{Classify: classify, Limit: 5}, {Classify: globClassify}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	alone, aloneErr := Scan(root, Options{Classify: classify, Limit: 5})
	if !errors.Is(answers[0].Err, ErrLimit) || !errors.Is(aloneErr, ErrLimit) {
		t.Fatalf("limited question: %v, alone %v; want ErrLimit", answers[0].Err, aloneErr)
	}
	if !slices.Equal(rels(answers[0].Picked), rels(alone.Picked)) || answers[0].Entries != alone.Entries {
		t.Fatalf("limited question picked %v (%d entries), alone %v (%d)", rels(answers[0].Picked), answers[0].Entries, rels(alone.Picked), alone.Entries)
	}
	if got, want := rels(answers[1].Picked), oracleOf(t, root, globClassify); answers[1].Err != nil || !slices.Equal(got, want) {
		t.Fatalf("unlimited question: %v, %v; want %v", got, answers[1].Err, want)
	}
	if _, _, err := ScanAll(root, nil, Options{}); err == nil {
		t.Fatal("ScanAll without questions: no error")
	}
}

// TestCorruptCacheIgnored: every truncation of a cache file fails to
// decode, and a scan over a damaged cache reads the tree and finds what
// a full walk finds.
func TestCorruptCacheIgnored(t *testing.T) {
	root, cache := wideTree(t, false), cacheDir(t)
	opts := Options{Classify: classify, Key: "k", CacheDir: cache, RacyWindow: -1}
	settle()
	if _, err := Scan(root, opts); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(cache, "*.scan"))
	if len(files) != 1 {
		t.Fatalf("%d cache files, want 1", len(files))
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if r, err := decodeCache(raw, "k", 1); err != nil || len(r.dirs) == 0 {
		t.Fatalf("the cache as written: %v", err)
	}
	for n := range len(raw) {
		if _, err := decodeCache(raw[:n], "k", 1); err == nil {
			t.Fatalf("a cache cut to %d of %d bytes decoded", n, len(raw))
		}
	}
	if _, err := decodeCache(append(slices.Clone(raw), 0), "k", 1); err == nil {
		t.Fatal("a cache with a trailing byte decoded")
	}
	if _, err := decodeCache(raw, "k", 2); err == nil {
		t.Fatal("a cache of one question decoded for two")
	}
	if err := os.WriteFile(files[0], raw[:len(raw)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Scan(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rels(res.Picked), oracle(t, root); res.DirsCached != 0 || !slices.Equal(got, want) {
		t.Fatalf("over a damaged cache: cached %d, picked %v, want 0 and %v", res.DirsCached, got, want)
	}
}

// TestCachedScanNamesBeforeSlash: names that sort before '/' ("a-b",
// "a.c" beside "a/x") put the walk's order and the records' apart, so the
// records are found by search there; a change below any of them is still
// found, and an unchanged tree is still read from the cache alone.
func TestCachedScanNamesBeforeSlash(t *testing.T) {
	for _, tc := range []struct {
		name   string
		padded bool   // enough directories that the lookups are prefetched
		change string // a pick made after the first scan
	}{
		{"after a/ subtree", false, "a-b/y/AGENTS.md"},
		{"inside a/ subtree", false, "a/x-1/w/.claude/"},
		{"between", false, "a.c/z/AGENTS.md"},
		{"prefetched", true, "a-b/y/.git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, cache := tree(t), cacheDir(t)
			write(t, root, "a/x/f", "a/x-1/w/f", "a/x.2/f", "a-b/y/f", "a.c/z/f", "a0/f")
			if tc.padded {
				for i := range minPrefetch + 20 {
					write(t, root, fmt.Sprintf("a-p/p%02d/q%d/", i/10, i%10))
				}
			}
			opts := Options{Classify: classify, Key: "k", CacheDir: cache, RacyWindow: -1}
			settle()
			first, err := Scan(root, opts)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Scan(root, opts)
			if err != nil {
				t.Fatal(err)
			}
			if again.DirsRead != 0 || again.DirsCached != first.DirsRead {
				t.Fatalf("unchanged tree: read %d, cached %d, want 0 and %d", again.DirsRead, again.DirsCached, first.DirsRead)
			}
			if tc.padded && again.DirsPrefetched == 0 {
				t.Fatal("no lookup prefetched")
			}
			write(t, root, tc.change)
			settle()
			second, err := Scan(root, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := rels(second.Picked), oracle(t, root); !slices.Equal(got, want) || !slices.Contains(got, strings.TrimSuffix(tc.change, "/")) {
				t.Fatalf("after %s the cached scan picked %v, a full walk %v", tc.change, got, want)
			}
			if second.DirsRead > 1 || second.DirsRead+second.DirsCached != first.DirsRead {
				t.Fatalf("after %s: read %d, cached %d; want 1 read of %d", tc.change, second.DirsRead, second.DirsCached, first.DirsRead)
			}
		})
	}
}

// TestCacheRecordsInOrder: a cache whose records are out of order or
// repeat a path is corrupt (find searches them in order).
func TestCacheRecordsInOrder(t *testing.T) {
	raw := encodeCache("k", 1, []dirRecord{{Rel: "a", Ctime: 1}, {Rel: "b", Ctime: 1}})
	if r, err := decodeCache(raw, "k", 1); err != nil || r.find("a") != 0 || r.find("b") != 1 || r.find("c") != -1 {
		t.Fatalf("the cache as written: %v", err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"out of order", "\x01a", "\x01c"},
		{"repeated", "\x01b", "\x01a"},
	} {
		bad := bytes.Replace(raw, []byte(tc.from), []byte(tc.to), 1)
		if bytes.Equal(bad, raw) {
			t.Fatalf("%s: nothing replaced", tc.name)
		}
		if _, err := decodeCache(bad, "k", 1); err == nil {
			t.Errorf("%s: records decoded", tc.name)
		}
	}
}
