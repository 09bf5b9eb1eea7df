package policy

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// loadCached is fixture.load through cache.
func (f *fixture) loadCached(t *testing.T, cache *ParseCache) (*Compiled, error) {
	t.Helper()
	c, _, err := Load(LoadOptions{
		ManagedDir: f.managed, Home: f.home, Workspace: f.ws, Flags: &Flags{},
		Env: func(k string) string { return f.env[k] }, ParseCache: cache,
	})
	return c, err
}

// rewrite replaces the file at p with content, keeping its timestamps: a
// cache that trusted timestamps (or sizes: the tests' contents have equal
// lengths) would miss the change.
func rewrite(t *testing.T, p, content string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, time.Time{}, fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// A file changed after a Load takes effect on the next Load through the
// same cache, in every layer, and what a cached parse compiles to is what
// a fresh parse compiles to.
func TestParseCacheSeesEveryChange(t *testing.T) {
	for _, layer := range []string{"etc/policy.toml", "etc/policy.d/10-site.toml", "home/.openoxide/config.toml", "ws/.openoxide/config.toml"} {
		t.Run(layer, func(t *testing.T) {
			f := newFixture(t)
			p := f.write(t, layer, "[limits]\npids_max = 111\n")
			cache := NewParseCache()
			for round, want := range []int64{111, 111, 222, 222, 333} {
				if round == 2 || round == 4 {
					rewrite(t, p, fmt.Sprintf("[limits]\npids_max = %d\n", want))
				}
				c, err := f.loadCached(t, cache)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if c.Limits.PidsMax != want {
					t.Errorf("round %d: pids_max %d, want %d", round, c.Limits.PidsMax, want)
				}
				fresh, err := f.loadCached(t, nil)
				if err != nil {
					t.Fatal(err)
				}
				gd, _ := c.Digest()
				fd, _ := fresh.Digest()
				if gd != fd {
					t.Errorf("round %d: cached load's digest %s, a fresh one's %s", round, gd, fd)
				}
			}
		})
	}
}

// The managed policy's locks hold through the cache: a lock the
// administrator adds refuses the user's loosening on the next Load, one
// lifted allows it, and one put back refuses it again.
func TestParseCacheKeepsManagedLocks(t *testing.T) {
	f := newFixture(t)
	const (
		locked   = "[network]\npolicy = \"none\"\n[managed]\nlocked = [\"network.policy\"]\n"
		unlocked = "[network]\npolicy = \"none\"\n[managed]\nlocked = [\"network.loopback\"]\n"
	)
	mp := f.write(t, "etc/policy.toml", unlocked)
	f.write(t, "ws/.openoxide/config.toml", "[network]\npolicy = \"full\"\n")
	cache := NewParseCache()
	for i, tc := range []struct {
		managed string
		refused bool
	}{
		{unlocked, false}, {locked, true}, {locked, true}, {unlocked, false}, {locked, true},
	} {
		rewrite(t, mp, tc.managed)
		c, err := f.loadCached(t, cache)
		switch {
		case tc.refused && err == nil:
			t.Errorf("step %d: the user's network.policy = full was accepted (%s) under a lock", i, c.Network.Policy)
		case tc.refused && !strings.Contains(err.Error(), "locked"):
			t.Errorf("step %d: refused, but not for the lock: %v", i, err)
		case !tc.refused && err != nil:
			t.Errorf("step %d: refused without a lock: %v", i, err)
		case !tc.refused && c.Network.Policy != NetFull:
			t.Errorf("step %d: network.policy %s, want the user's full", i, c.Network.Policy)
		}
	}
}

// Loads through one cache may run at once (the daemon's requests do);
// run with -race.
func TestParseCacheConcurrentLoads(t *testing.T) {
	f := newFixture(t)
	f.write(t, "etc/policy.toml", "[sandbox]\ndeny_read = [\"/srv/secret\"]\n")
	extra := f.mkdir(t, "extra")
	f.write(t, "ws/.openoxide/config.toml", "[sandbox]\nwritable_roots = [\""+extra+"\"]\n[network]\npolicy = \"allowlist\"\nallow = [\"example.com:443\"]\n")
	cache := NewParseCache()
	want, err := f.loadCached(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := want.Digest()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				c, err := f.loadCached(t, cache)
				if err != nil {
					errs <- err
					return
				}
				if d, _ := c.Digest(); d != wd {
					errs <- fmt.Errorf("digest %s, want %s", d, wd)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
