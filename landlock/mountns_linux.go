//go:build linux

package landlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/internal/treescan"
	"github.com/openoxide/oxsupervise/launcher"
	"github.com/openoxide/oxsupervise/policy"
)

// PlanMounts computes the mount plan for c. rs may be nil (no Landlock).
// mounts are the supervisor's (mountinfo.Read): its caller reads them
// once for this plan and the session's other layers.
func PlanMounts(c *policy.Compiled, rs *launcher.Ruleset, mounts []mountinfo.Mount) (launcher.MountPlan, error) {
	var m launcher.MountPlan
	m.ReadOnly = kernelInterfaceMounts(mounts)
	if c.Mode == policy.ModeFullAccess {
		return m, nil
	}
	if rs != nil {
		m.Masked = append(m.Masked, rs.Masked...)
	}
	m.Writable = viewWritable(c)
	if privateShm(c) {
		m.PrivateShm = true
		// PrivateShmWritable, from the writable list just made.
		m.ShmReadOnly = !slices.Contains(m.Writable, launcher.DevShm)
	}
	socks, err := escapeSocketMasks(escapeSockets, c.Network.AllowUnixSockets)
	if err != nil {
		return m, err
	}
	m.Masked = append(m.Masked, socks...)
	// The bind step's walk of the workspace found the globs' entries
	// already (policy.Compiled.BoundGlobMatches); a glob it did not walk
	// for is walked here, with the supervisor's access. A cache the walk
	// cannot use only costs the start a full walk.
	var cache string
	for _, g := range c.DenyReadGlobs {
		matches, ok := c.BoundGlobMatches(g)
		if !ok {
			if cache == "" {
				cache, _ = policy.ScanCacheDir(os.Geteuid())
			}
			if matches, err = globMatches(g, maxGlobWalk, cache); err != nil {
				return m, err
			}
		}
		m.Masked = append(m.Masked, matches...)
	}
	if !c.FilesystemRules {
		// external-sandbox: the outer sandbox owns the filesystem, but
		// credentials stay unreadable. Splitting reads with Landlock would
		// make files created during the session in those directories
		// unreadable too, so existing anchors are hidden instead.
		for _, a := range c.DenyRead {
			if a.Exists {
				m.Masked = append(m.Masked, a.Path)
			}
		}
		return m, nil
	}
	pinned := map[string]bool{}
	firsts := map[string]bool{}
	for _, p := range c.ProtectedPatterns {
		if len(p.Components) > 1 {
			firsts[p.Components[0]] = true
		}
	}
	for _, a := range c.ProtectedPaths {
		if !a.Exists {
			continue
		}
		m.Protected = append(m.Protected, launcher.Inode{Path: a.Path, Dev: a.Dev, Ino: a.Ino})
		for _, root := range c.WritableRoots {
			if !inside(a.Path, root.Path) {
				continue
			}
			rel, err := filepath.Rel(root.Path, filepath.Dir(a.Path))
			if err != nil || rel == "." {
				continue
			}
			comps := strings.Split(rel, string(filepath.Separator))
			for i, comp := range comps {
				if !firsts[comp] {
					continue
				}
				for j := i; j < len(comps); j++ {
					pinned[filepath.Join(append([]string{root.Path}, comps[:j+1]...)...)] = true
				}
				break
			}
		}
	}
	for p := range pinned {
		m.Pinned = append(m.Pinned, p)
	}
	sort.Strings(m.Pinned)
	return m, nil
}

// escapeSockets are well-known sockets whose servers act for the user
// outside the session: through them a confined process can start processes
// outside its cgroup and every other layer (systemd-run --user, docker run
// -v /:/host) or use the user's keys (agents). Landlock cannot refuse
// connect(2) on a pathname socket, so the mount layer hides them unless the
// policy lists them in network.allow_unix_sockets.
var escapeSockets = []string{
	"/run/user/*/bus", "/run/user/*/systemd/private", "/run/user/*/systemd/io.systemd.*",
	"/run/dbus/system_bus_socket", "/run/systemd/private",
	"/run/docker.sock", "/run/user/*/docker.sock", "/run/containerd/containerd.sock",
	"/run/podman/podman.sock", "/run/user/*/podman/podman.sock",
	"/run/user/*/gnupg/S.gpg-agent*", "/run/user/*/keyring/*", "/tmp/ssh-*/agent.*",
}

// escapeSocketMasks lists the existing sockets matching globs, symlinks
// resolved (the mount layer refuses to follow them), except allowed ones.
func escapeSocketMasks(globs, allowed []string) ([]string, error) {
	allow := map[string]bool{}
	for _, a := range allowed {
		allow[filepath.Clean(a)] = true
		if r, err := filepath.EvalSymlinks(a); err == nil {
			allow[r] = true
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, g := range globs {
		matches, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("mount namespace: escape socket pattern %s: %w", g, err)
		}
		for _, p := range matches {
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				continue // vanished, or a dangling link: nothing to reach
			}
			fi, err := os.Lstat(real)
			if err != nil || fi.Mode().Type() != os.ModeSocket || allow[p] || allow[real] || seen[real] {
				continue
			}
			seen[real] = true
			out = append(out, real)
		}
	}
	return out, nil
}

// maxGlobWalk bounds the walk for deny-read globs: a workspace with more
// entries than this fails closed instead of stalling the start.
const maxGlobWalk = policy.MaxGlobWalk

// globMatches lists the existing entries below g.Within that g matches
// (policy.ScanGlob: symlinks neither followed nor masked, .git not
// descended into), with cache (policy.ScanCacheDir; "" for none), so an
// unchanged directory of a large workspace costs one lstat per start.
func globMatches(g policy.NameGlob, limit int, cache string) ([]string, error) {
	if _, err := os.Lstat(g.Within); os.IsNotExist(err) {
		return nil, nil
	}
	out, err := policy.ScanGlob(g, limit, cache)
	if errors.Is(err, treescan.ErrLimit) {
		err = fmt.Errorf("more than %d entries below %s", limit, g.Within)
	}
	if err != nil {
		return nil, fmt.Errorf("mount namespace: deny-read %s below %s: %w", g.Include, g.Within, err)
	}
	return out, nil
}

// kernelInterfaceMounts lists the mount points made read-only in every
// session: /sys and /proc/sys, plus cgroup and bpf filesystems mounted
// outside /sys.
func kernelInterfaceMounts(mounts []mountinfo.Mount) []string {
	out := []string{"/sys", "/proc/sys"}
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup", "cgroup2", "bpf":
			if m.Point != "/sys" && !strings.HasPrefix(m.Point, "/sys/") {
				out = append(out, m.Point)
			}
		}
	}
	return out
}
