//go:build linux

package quarantine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
)

var errNoParent = errors.New("the entry's directory changed (a symlink or it vanished)")

// move takes target (below r) out of the workspace: into
// Dir/<session>/<target's absolute path>, with a numeric suffix when that
// name was used before. Every step goes through descriptors opened below
// the root without following symlinks, so a session that swaps a directory
// for a symlink meanwhile cannot make the supervisor move something
// outside its roots.
func (w *Watch) move(r root, target string, pid int, p policy.ProtectedPattern, reason string) {
	m := Moved{Path: target, PID: pid, Pattern: p, Reason: reason}
	m.To, m.Err = w.moveOut(r, target)
	w.mu.Lock()
	w.moved = append(w.moved, m)
	w.mu.Unlock()
	if w.opts.Report != nil {
		w.opts.Report(m)
	}
}

func (w *Watch) moveOut(r root, target string) (string, error) {
	rel := strings.TrimPrefix(target, r.path+"/")
	parentRel, name := filepath.Split(rel)
	parentRel = strings.TrimSuffix(parentRel, "/")
	if parentRel == "" {
		parentRel = "."
	}
	parent, err := unix.Openat2(r.fd, parentRel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return "", fmt.Errorf("quarantine %s: %w (%v)", target, errNoParent, err)
	}
	defer unix.Close(parent)

	dest := filepath.Join(w.dir, w.opts.Session, target)
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", target, err)
	}
	for i := 1; ; i++ {
		if _, err := os.Lstat(dest); os.IsNotExist(err) {
			break
		}
		dest = filepath.Join(w.dir, w.opts.Session, fmt.Sprintf("%s.%d", target, i))
	}
	destDir, err := unix.Open(filepath.Dir(dest), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("quarantine %s: %w", target, err)
	}
	defer unix.Close(destDir)
	err = unix.Renameat2(parent, name, destDir, filepath.Base(dest), unix.RENAME_NOREPLACE)
	if err == unix.EXDEV {
		// The quarantine is on another filesystem (a tmpfs /tmp root):
		// copy, then remove the original.
		src := fmt.Sprintf("/proc/self/fd/%d/%s", parent, name)
		if err := copyTree(src, dest); err != nil {
			return "", fmt.Errorf("quarantine %s: copy to %s: %w", target, dest, err)
		}
		err = os.RemoveAll(src)
	}
	if err != nil {
		return "", fmt.Errorf("quarantine %s: move to %s: %w", target, dest, err)
	}
	return dest, nil
}

// copyTree copies src (file, symlink or directory, not followed) to dst.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		t, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(t, dst)
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode().IsRegular():
		in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm()&0o700)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	return nil // fifos, sockets: nothing to keep
}

var (
	// errNotThere: no entry at the path, or one only a symlink on the way
	// leads to.
	errNotThere = errors.New("not there")
	// errNotRegular: the entry is no regular file (a FIFO would block the
	// read, a symlink would read something else).
	errNotRegular = errors.New("not a regular file")
)

// maxGitFile bounds what is read of a .git file or commondir: git itself
// reads only the first line.
const maxGitFile = 4096

// readDeferred reads the first bytes of the CheckedAtEnd entry at p,
// opened below its root without following a symlink anywhere on the way,
// so the check reads the entry the session made there and nothing it
// planted to be read instead.
func (w *Watch) readDeferred(p string) ([]byte, error) {
	r, _, ok := w.rootOf(p)
	if !ok {
		return nil, errNotThere
	}
	fd, err := unix.Openat2(r.fd, strings.TrimPrefix(p, r.path+"/"), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == unix.ENOENT || err == unix.ENOTDIR || err == unix.EXDEV:
		return nil, errNotThere
	case err == unix.ELOOP:
		// A symlink: at the entry itself (not a file), or on the way.
		var st unix.Stat_t
		if unix.Fstatat(r.fd, strings.TrimPrefix(p, r.path+"/"), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return nil, errNotRegular
		}
		return nil, errNotThere
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	b := make([]byte, maxGitFile)
	n, err := io.ReadFull(f, b)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return b[:n], err
}

// suspicious reports whether a CheckedAtEnd entry at p (its first bytes
// are content, or readErr says why there are none) points git somewhere
// of the session's choosing, and why: a `.git` file whose gitdir: is not
// a directory below worktrees/ or modules/ of a `.git` directory that
// existed before the session, or one where the session could have
// written git's config, or a commondir that does not name its own `.git`.
func suspicious(c *policy.Compiled, p string, content []byte, readErr error) (string, bool) {
	if readErr != nil {
		return fmt.Sprintf("unreadable (%v)", readErr), true
	}
	line, _, _ := strings.Cut(string(content), "\n")
	line = strings.TrimSpace(line)
	if filepath.Base(p) == "commondir" {
		own := filepath.Dir(filepath.Dir(filepath.Dir(p)))
		if resolved(filepath.Dir(p), line) != own {
			return fmt.Sprintf("a worktree commondir naming %s, not its own %s", line, own), true
		}
		return "", false
	}
	target, ok := policy.GitdirTarget(content, p)
	if !ok {
		return "a .git file without a gitdir: line", true
	}
	dir := filepath.Clean(target)
	if !belowExistingRepository(c, dir) {
		return fmt.Sprintf("a .git file whose gitdir: %s is not below an existing repository's worktrees/ or modules/", dir), true
	}
	if rel, ok := belowRoot(c, dir); ok && c.ProtectedMatch(append(rel, "config"), false) == nil {
		// Deeper than the protected patterns reach (modules of modules
		// of modules): the session could have written its config.
		return fmt.Sprintf("a .git file whose gitdir: %s is a directory whose config no protected pattern covers", dir), true
	}
	return "", false
}

// belowExistingRepository reports whether dir lies below worktrees/ or
// modules/ of a .git directory the policy found when the session started.
func belowExistingRepository(c *policy.Compiled, dir string) bool {
	for _, a := range c.ProtectedPaths {
		i := strings.Index(a.Path, "/.git/")
		if i < 0 {
			continue
		}
		gitDir := a.Path[:i+len("/.git")]
		for _, sub := range []string{"/worktrees/", "/modules/"} {
			if strings.HasPrefix(dir, gitDir+sub) {
				return true
			}
		}
	}
	return false
}

// belowRoot returns dir's components below the writable root it lies in.
func belowRoot(c *policy.Compiled, dir string) ([]string, bool) {
	best := ""
	for _, a := range c.WritableRoots {
		if a.Dir && strings.HasPrefix(dir, a.Path+"/") && len(a.Path) > len(best) {
			best = a.Path
		}
	}
	if best == "" {
		return nil, false
	}
	return strings.Split(strings.TrimPrefix(dir, best+"/"), "/"), true
}

func resolved(base, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}
