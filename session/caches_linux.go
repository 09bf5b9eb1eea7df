//go:build linux

package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
)

// SandboxCacheDir is the per-user directory, below ~/.cache, that holds
// the tool caches of workspace-write sessions: only sessions write it.
// A build cache a session wrote must never be read by the user's own
// unsandboxed builds (a poisoned Go build cache entry is code the user
// then runs), so sessions do not write the user's caches; they get their
// own instead, so that builds work without configuration.
const SandboxCacheDir = "oxsupervise-sandbox"

// sandboxCaches is what prepareSandboxCaches set up.
type sandboxCaches struct {
	root   string
	policy *policy.Compiled // the session's policy with root as a writable root
	env    []string         // the session's environment pointing the tools at root
}

// cacheVars are the variables that point each tool at its directory below
// the sandbox cache. CARGO_HOME also holds cargo's config and installed
// binaries: a session's cargo does not read ~/.cargo/config.toml (project
// .cargo/config.toml files still apply), and ~/.cargo/bin stays on PATH.
var cacheVars = []struct{ name, dir string }{
	{"GOCACHE", "go-build"}, {"GOMODCACHE", "go-mod"}, {"npm_config_cache", "npm"},
	{"PIP_CACHE_DIR", "pip"}, {"CARGO_HOME", "cargo"},
}

// prepareSandboxCaches makes sure ~/.cache/oxsupervise-sandbox exists for
// the session's user in workspace-write sessions and returns the policy
// and environment that point each tool at its directory below it; nil
// when the session gets none (another mode, no usable HOME). Only the
// root is created, once, and kept: it is the writable root's anchor, and
// each tool creates its own directory below it the first time it needs
// one (go, npm, pip and cargo all make a missing cache directory), so a
// start finds the root with one lookup instead of creating the caches of
// tools the session never runs, and its end removes nothing (issue 18).
// Go still reads the user's module cache: GOPROXY tries it first
// (file://), so modules the user has need no network.
func prepareSandboxCaches(c *policy.Compiled, env []string, uid, gid int) (*sandboxCaches, error) {
	if c.Mode != policy.ModeWorkspaceWrite || !c.FilesystemRules {
		return nil, nil
	}
	home := EnvValue(env, "HOME")
	if !filepath.IsAbs(home) {
		return nil, fmt.Errorf("sandbox caches: HOME %q is not an absolute path", home)
	}
	real, err := filepath.EvalSymlinks(home)
	if err != nil {
		return nil, fmt.Errorf("sandbox caches: HOME %s: %w", home, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		return nil, fmt.Errorf("sandbox caches: HOME %s: %w", real, err)
	}
	if uid != 0 && int(st.Uid) != uid {
		// Creating directories as root in a home someone else owns is
		// how a supervisor gets tricked into writing where it must not.
		return nil, fmt.Errorf("sandbox caches: HOME %s is owned by uid %d, not the session's user %d", real, st.Uid, uid)
	}
	root := filepath.Join(real, ".cache", SandboxCacheDir)
	if made, err := mkdirOwned(real, filepath.Join(".cache", SandboxCacheDir), uid, gid); err != nil {
		// A directory left half made (a failed chown leaves it root's)
		// would be found, and used, by every later start.
		removeEmpty(made)
		return nil, fmt.Errorf("sandbox caches: %w", err)
	}
	if err := unix.Stat(root, &st); err != nil {
		return nil, fmt.Errorf("sandbox caches: %w", err)
	}
	p := *c
	p.WritableRoots = append(slices.Clone(c.WritableRoots), policy.Anchor{
		Path: root, Dev: st.Dev, Ino: st.Ino, Dir: true, Exists: true, Source: "default (sandbox caches, " + root + ")"})
	out := &sandboxCaches{root: root, policy: &p}
	set := map[string]string{}
	for _, v := range cacheVars {
		set[v.name] = filepath.Join(root, v.dir)
	}
	if mod := userGoModCache(env, real); mod != "" {
		proxy := EnvValue(env, "GOPROXY")
		if proxy == "" {
			proxy = "https://proxy.golang.org,direct"
		}
		set["GOPROXY"] = "file://" + filepath.Join(mod, "cache", "download") + "," + proxy
	}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := set[name]; !ok {
			out.env = append(out.env, kv)
		}
	}
	for _, v := range append(cacheVars, struct{ name, dir string }{"GOPROXY", ""}) {
		if val, ok := set[v.name]; ok {
			out.env = append(out.env, v.name+"="+val)
		}
	}
	return out, nil
}

// userGoModCache is the user's own Go module cache, when it has a
// download cache to read from.
func userGoModCache(env []string, home string) string {
	mod := EnvValue(env, "GOMODCACHE")
	if mod == "" {
		gopath := filepath.Join(home, "go")
		if gp := EnvValue(env, "GOPATH"); gp != "" {
			gopath = filepath.SplitList(gp)[0]
		}
		mod = filepath.Join(gopath, "pkg", "mod")
	}
	if fi, err := os.Stat(filepath.Join(mod, "cache", "download")); err != nil || !fi.IsDir() {
		return ""
	}
	return mod
}

// mkdirOwned creates rel below base, component by component, never
// following a symlink, and gives each directory it creates to uid:gid.
// It returns the directories it created.
func mkdirOwned(base, rel string, uid, gid int) (created []string, err error) {
	fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", base, err)
	}
	// Every start but a user's first finds the whole path there: one
	// lookup that refuses a symlink anywhere on it says so, instead of a
	// mkdir and an open per component (issue 18).
	if there, err := unix.Openat2(fd, rel, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	}); err == nil {
		unix.Close(there)
		unix.Close(fd)
		return nil, nil
	}
	path := base
	for _, comp := range strings.Split(rel, "/") {
		path = filepath.Join(path, comp)
		err := unix.Mkdirat(fd, comp, 0o700)
		made := err == nil
		if err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return created, fmt.Errorf("mkdir %s: %w", path, err)
		}
		next, err := unix.Openat(fd, comp, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return created, fmt.Errorf("open %s (a symlink is refused): %w", path, err)
		}
		fd = next
		if made {
			created = append(created, path)
			if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
				unix.Close(fd)
				return created, fmt.Errorf("chown %s: %w", path, err)
			}
		}
	}
	unix.Close(fd)
	return created, nil
}

// removeEmpty removes the directories in created that are still empty,
// deepest first (rmdir never removes content): what mkdirOwned made before
// it failed.
func removeEmpty(created []string) {
	for i := len(created) - 1; i >= 0; i-- {
		unix.Rmdir(created[i])
	}
}
