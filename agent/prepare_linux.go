//go:build linux

package agent

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// noCreate marks a state file that is granted only when it exists.
const noCreate = "\x00"

// Prepare creates the profile's missing state entries below home (the
// kernel rules that make them writable name existing inodes), owned by
// uid:gid, mode 0700 for directories and 0600 for files. It never follows
// a symlink below home: a symlink on the way is an error, so the
// supervisor, running as root, cannot be steered into creating files
// elsewhere. It returns the paths it created.
func (p *Profile) Prepare(home string, uid, gid int) ([]string, error) {
	root, err := filepath.EvalSymlinks(home)
	if err != nil {
		return nil, fmt.Errorf("agent %s: home %s: %w", p.Name, home, err)
	}
	var created []string
	for _, e := range p.State {
		rel, ok := strings.CutPrefix(e.Value, "~/")
		if !ok {
			continue
		}
		content, isFile := p.StateFiles[e.Value]
		if isFile && content == noCreate {
			continue
		}
		made, err := ensure(root, rel, isFile, content, uid, gid)
		if err != nil {
			return created, fmt.Errorf("agent %s: state %s: %w", p.Name, e.Value, err)
		}
		if made {
			created = append(created, filepath.Join(home, rel))
		}
	}
	return created, nil
}

// ensure creates root/rel (and missing parents) unless it exists.
func ensure(root, rel string, file bool, content string, uid, gid int) (bool, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer func() { unix.Close(dir) }()
	comps := strings.Split(filepath.Clean(rel), "/")
	made := false
	for i, c := range comps {
		last := i == len(comps)-1
		if c == ".." || c == "." || c == "" {
			return false, fmt.Errorf("bad component %q", c)
		}
		if last && file {
			fd, err := unix.Openat(dir, c, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			if errors.Is(err, unix.EEXIST) {
				var st unix.Stat_t
				if err := unix.Fstatat(dir, c, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					return made, err
				}
				if st.Mode&unix.S_IFMT != unix.S_IFREG {
					return made, fmt.Errorf("exists and is not a regular file")
				}
				return made, nil
			}
			if err != nil {
				return made, err
			}
			defer unix.Close(fd)
			if _, err := unix.Write(fd, []byte(content)); err != nil {
				return true, err
			}
			return true, unix.Fchown(fd, uid, gid)
		}
		err := unix.Mkdirat(dir, c, 0o700)
		switch {
		case err == nil:
			made = true
			if err := unix.Fchownat(dir, c, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return made, err
			}
		case !errors.Is(err, unix.EEXIST):
			return made, err
		}
		next, err := unix.Openat(dir, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return made, fmt.Errorf("%s is a symlink or not a directory; not followed", filepath.Join(comps[:i+1]...))
			}
			return made, err
		}
		unix.Close(dir)
		dir = next
	}
	return made, nil
}

// rewriteOwned replaces the content of the regular file at path, which
// must be owned by uid, never following a symlink there.
func rewriteOwned(path string, b []byte, uid int) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != uid {
		return fmt.Errorf("not a regular file owned by uid %d", uid)
	}
	if err := unix.Ftruncate(fd, 0); err != nil {
		return err
	}
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
