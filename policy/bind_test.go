package policy

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/internal/shquote"
)

func TestCompileErrors(t *testing.T) {
	t.Run("workspace missing", func(t *testing.T) {
		f := newFixture(t)
		_, _, _, err := f.load(t, "--workspace", filepath.Join(f.root, "nope"))
		if err == nil || !strings.HasPrefix(err.Error(), "flag --workspace: workspace ") || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("workspace is a file", func(t *testing.T) {
		f := newFixture(t)
		p := f.write(t, "file", "x")
		if _, _, _, err := f.load(t, "--workspace", p); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("writable root missing", func(t *testing.T) {
		f := newFixture(t)
		up := f.write(t, "home/.openoxide/config.toml", "[sandbox]\nwritable_roots = [\"/nonexistent/x\"]\n")
		if _, _, _, err := f.load(t); err == nil || !strings.HasPrefix(err.Error(), up+":2:19: writable root") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("config flag missing", func(t *testing.T) {
		f := newFixture(t)
		if _, _, _, err := f.load(t, "--config", filepath.Join(f.root, "nope.toml")); err == nil || !strings.HasPrefix(err.Error(), "flag --config: ") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("protected symlink outside root", func(t *testing.T) {
		f := newFixture(t)
		outside := f.mkdir(t, "elsewhere/.claude")
		if err := os.Symlink(outside, filepath.Join(f.ws, ".claude")); err != nil {
			t.Fatal(err)
		}
		_, _, _, err := f.load(t)
		link := filepath.Join(f.ws, ".claude")
		if err == nil || !strings.Contains(err.Error(), "outside the writable root") || !strings.HasPrefix(err.Error(), link+": ") {
			t.Fatalf("got %v", err)
		}
		// The exact command that fixes it.
		q := shquote.Quote
		if fix := "rm " + q(link) + " && cp -a " + q(outside) + " " + q(link); !strings.HasSuffix(err.Error(), fix) {
			t.Fatalf("got %v; want it to end in %q", err, fix)
		}
	})
	// A session's `ln -s /elsewhere .openoxide` (refused where BPF-LSM
	// runs, quarantined where not) would stop every later session.
	for _, name := range []string{"AGENTS.md", ".openoxide"} {
		t.Run("protected dangling symlink "+name, func(t *testing.T) {
			f := newFixture(t)
			link := filepath.Join(f.ws, name)
			if err := os.Symlink(filepath.Join(f.root, "gone"), link); err != nil {
				t.Fatal(err)
			}
			_, _, _, err := f.load(t)
			if err == nil || !strings.Contains(err.Error(), "dangling symlink") || !strings.HasSuffix(err.Error(), "remove it: rm "+shquote.Quote(link)) {
				t.Fatalf("got %v; want the dangling symlink and the command that removes it", err)
			}
		})
	}
	t.Run("git hooks symlink", func(t *testing.T) {
		f := newFixture(t)
		f.mkdir(t, "wt")
		f.mkdir(t, "gitdirs/wt")
		if err := os.Symlink("/usr/share", filepath.Join(f.root, "gitdirs/wt/hooks")); err != nil {
			t.Fatal(err)
		}
		f.write(t, "ws/.git", "gitdir: ../gitdirs/wt\n")
		link := filepath.Join(f.root, "gitdirs/wt/hooks")
		_, _, _, err := f.load(t)
		if err == nil || !strings.Contains(err.Error(), "git control entry is a symlink") {
			t.Fatalf("got %v", err)
		}
		q := shquote.Quote
		if fix := "rm " + q(link) + " && cp -a " + q("/usr/share") + " " + q(link); !strings.HasSuffix(err.Error(), fix) {
			t.Fatalf("got %v; want it to end in %q", err, fix)
		}
	})
}

func TestProtectedScan(t *testing.T) {
	f := newFixture(t)
	f.mkdir(t, "ws/.git/hooks")
	f.write(t, "ws/.git/config", "[core]\n")
	f.mkdir(t, "ws/.git/objects/ab")
	f.mkdir(t, "ws/.git/modules/lib/hooks")
	f.mkdir(t, "ws/sub/nested/.git/info")
	f.write(t, "ws/sub/nested/.git/config", "")
	f.write(t, "ws/pkg/CLAUDE.md", "x")
	f.mkdir(t, "ws/pkg/.vscode")
	f.write(t, "ws/pkg/.vscode/settings.json", "{}")
	f.write(t, "ws/src/hooks/useThing.js", "")
	// A linked worktree: .git file pointing into the main repo's worktrees/.
	f.mkdir(t, "main/.git/worktrees/wt/hooks")
	f.write(t, "main/.git/worktrees/wt/commondir", "../..\n")
	f.write(t, "main/.git/config", "")
	f.mkdir(t, "main/.git/hooks")
	f.write(t, "ws/wt/.git", "gitdir: "+filepath.Join(f.root, "main/.git/worktrees/wt")+"\n")
	// A symlinked protected name inside the root is recorded, target too.
	f.mkdir(t, "ws/real-codex")
	if err := os.Symlink("real-codex", filepath.Join(f.ws, ".codex")); err != nil {
		t.Fatal(err)
	}
	c, _, _ := f.mustLoad(t)
	got := paths(c.ProtectedPaths)
	for _, want := range []string{
		"ws/.git/hooks", "ws/.git/config", "ws/.git/modules/lib/hooks", "ws/sub/nested/.git/info", "ws/sub/nested/.git/config",
		"ws/pkg/CLAUDE.md", "ws/pkg/.vscode", "ws/wt/.git",
		"main/.git/worktrees/wt/hooks", "main/.git/worktrees/wt/commondir", "main/.git/config", "main/.git/hooks",
		"ws/.codex", "ws/real-codex",
	} {
		if !slices.Contains(got, filepath.Join(f.root, want)) {
			t.Errorf("protected paths lack %s", want)
		}
	}
	for _, unwanted := range []string{"ws/.git", "ws/.git/objects", "ws/pkg/.vscode/settings.json", "ws/src/hooks"} {
		if slices.Contains(got, filepath.Join(f.root, unwanted)) {
			t.Errorf("protected paths contain %s", unwanted)
		}
	}
	link := c.ProtectedPaths[slices.Index(got, filepath.Join(f.ws, ".codex"))]
	var st os.FileInfo
	st, _ = os.Lstat(filepath.Join(f.ws, ".codex"))
	if dev, ino := fileID(st); link.Ino != ino || link.Dev != dev {
		t.Errorf("symlink anchor %+v must be the link itself (ino %d)", link, ino)
	}

	// protect_git = "all" protects the whole git directory, worktree gitdir included.
	f.write(t, "home/.openoxide/config.toml", "[sandbox]\nprotect_git = \"all\"\n")
	c, _, _ = f.mustLoad(t)
	got = paths(c.ProtectedPaths)
	for _, want := range []string{"ws/.git", "ws/sub/nested/.git", "main/.git/worktrees/wt"} {
		if !slices.Contains(got, filepath.Join(f.root, want)) {
			t.Errorf("protect_git=all: paths lack %s (%v)", want, got)
		}
	}
}

func TestDenyReadExisting(t *testing.T) {
	f := newFixture(t)
	f.mkdir(t, "home/.ssh")
	f.mkdir(t, "vault/aws")
	if err := os.Symlink(filepath.Join(f.root, "vault/aws"), filepath.Join(f.home, ".aws")); err != nil {
		t.Fatal(err)
	}
	c, _, _ := f.mustLoad(t)
	byPath := map[string]Anchor{}
	for _, a := range c.DenyRead {
		byPath[a.Path] = a
	}
	ssh := byPath[filepath.Join(f.home, ".ssh")]
	if !ssh.Exists || ssh.Ino == 0 || !ssh.Dir {
		t.Errorf("~/.ssh anchor %+v", ssh)
	}
	if a := byPath[filepath.Join(f.root, "vault/aws")]; !a.Exists || a.Ino == 0 {
		t.Errorf("resolved ~/.aws target missing: %v", paths(c.DenyRead))
	}
	if _, ok := byPath[filepath.Join(f.home, ".aws")]; !ok {
		t.Errorf("symlink ~/.aws itself missing: %v", paths(c.DenyRead))
	}
	if a := byPath[filepath.Join(f.home, ".kube")]; a.Exists || a.Path == "" {
		t.Errorf("missing ~/.kube must stay with Exists=false: %+v", a)
	}
}

func TestExplicitProtectedPaths(t *testing.T) {
	f := newFixture(t)
	f.mkdir(t, "ws/real")
	if err := os.Symlink("real", filepath.Join(f.ws, "link")); err != nil {
		t.Fatal(err)
	}
	f.write(t, "home/.openoxide/config.toml", "[sandbox]\nprotected_subpaths = [\""+filepath.Join(f.ws, "link")+"\", \""+filepath.Join(f.ws, "later")+"\", \""+filepath.Join(f.ws, "real")+"\"]\n")
	c, _, _ := f.mustLoad(t)
	got := paths(c.ProtectedPaths)
	for _, want := range []string{"link", "real", "later"} {
		if !slices.Contains(got, filepath.Join(f.ws, want)) {
			t.Errorf("protected paths %v lack %s", got, want)
		}
	}
	i := slices.Index(got, filepath.Join(f.ws, "later"))
	if c.ProtectedPaths[i].Exists {
		t.Errorf("not-yet-existing protected path marked existing")
	}
}

func TestScanBound(t *testing.T) {
	f := newFixture(t)
	for i := range 20 {
		f.write(t, filepath.Join("ws", "d", strings.Repeat("x", i+1)), "")
	}
	f.mkdir(t, "ws/zz/.git/hooks")
	var warn bytes.Buffer
	c := &Compiled{ProtectedPatterns: defaultProtectedPatterns("escalation"), ProtectedPathsComplete: true}
	sc := scanner{c: c, warn: &warn, limit: 5}
	if err := sc.scan(f.ws); err != nil {
		t.Fatal(err)
	}
	if c.ProtectedPathsComplete || !strings.Contains(warn.String(), "stopped scanning") {
		t.Errorf("bound not reported: complete=%t warn=%q", c.ProtectedPathsComplete, warn.String())
	}
	sc = scanner{c: c, warn: &warn, limit: maxScanEntries}
	c.ProtectedPathsComplete = true
	if err := sc.scan(f.ws); err != nil {
		t.Fatal(err)
	}
	if !c.ProtectedPathsComplete || !slices.Contains(paths(c.ProtectedPaths), filepath.Join(f.ws, "zz/.git/hooks")) {
		t.Errorf("full scan: complete=%t paths=%v", c.ProtectedPathsComplete, paths(c.ProtectedPaths))
	}
}
