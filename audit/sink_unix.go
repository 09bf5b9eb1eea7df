//go:build unix

package audit

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

const oNoFollow = syscall.O_NOFOLLOW

func checkFileOwner(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if euid := os.Geteuid(); int(sys.Uid) != euid {
		return fmt.Errorf("file is owned by uid %d, not by uid %d running the supervisor", sys.Uid, euid)
	}
	if !st.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	return nil
}

func checkDirSafe(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	perm := st.Mode()
	if perm&0o022 != 0 && perm&os.ModeSticky == 0 {
		return fmt.Errorf("directory %s is writable by others (mode %v) without the sticky bit", dir, perm.Perm())
	}
	return nil
}
