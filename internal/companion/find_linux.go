//go:build linux

package companion

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Find opens and checks the companion name of the running executable.
func Find(name string) (*Program, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find %s: the running executable: %w", name, err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	var self unix.Stat_t
	if err := unix.Stat(exe, &self); err != nil {
		return nil, fmt.Errorf("find %s: stat %s: %w", name, exe, err)
	}
	return FindIn(name, Dirs(exe), int(self.Uid))
}

// FindIn opens the first name in dirs and checks it, accepting root and
// owner as its owner.
func FindIn(name string, dirs []string, owner int) (*Program, error) {
	for _, dir := range dirs {
		path := filepath.Join(dir, name)
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		f := os.NewFile(uintptr(fd), path)
		if err := check(f, owner); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &Program{Name: name, Path: path, File: f}, nil
	}
	return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, name, strings.Join(dirs, ", "))
}

// check is the test a companion passes before it is run with the
// supervisor's privileges.
func check(f *os.File, owner int) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return errors.New("not a regular file")
	case st.Mode&0o111 == 0:
		return errors.New("not executable")
	case st.Uid != 0 && int(st.Uid) != owner:
		return fmt.Errorf("owned by uid %d, neither root nor the owner of oxsupervise (uid %d)", st.Uid, owner)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("writable by its group or by others (mode %04o)", st.Mode&0o7777)
	}
	return nil
}
