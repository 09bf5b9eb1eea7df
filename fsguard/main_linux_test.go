//go:build linux

package fsguard_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv turns the test binary into a child that performs one
// filesystem operation and prints its errno (0 for success), so tests run
// the real syscall from inside a session's cgroup.
const helperEnv = "OXS_FSGUARD_TEST_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		args := strings.Split(spec, "\x1f")
		err := runOp(args[0], args[1:])
		var errno unix.Errno
		switch {
		case err == nil:
			fmt.Println(0)
		case errors.As(err, &errno):
			fmt.Println(int(errno))
		default:
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runOp performs one operation with raw syscalls (no retries, no fallbacks
// that would hide the errno).
func runOp(op string, a []string) error {
	switch op {
	case "write": // open O_WRONLY, write a, close
		fd, err := unix.Open(a[0], unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, []byte(a[1]))
		return err
	case "create": // open O_CREAT|O_EXCL
		fd, err := unix.Open(a[0], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "otrunc": // open O_RDONLY|O_TRUNC
		fd, err := unix.Open(a[0], unix.O_RDONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "read":
		fd, err := unix.Open(a[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "truncate":
		return unix.Truncate(a[0], 0)
	case "ftruncate": // an fd opened read-write before the check cannot exist here: open then ftruncate
		fd, err := unix.Open(a[0], unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Ftruncate(fd, 0)
	case "unlink":
		return unix.Unlink(a[0])
	case "rmdir":
		return unix.Rmdir(a[0])
	case "mkdir":
		return unix.Mkdir(a[0], 0o755)
	case "mkfifo":
		return unix.Mkfifo(a[0], 0o644)
	case "mknod-null": // a character device equal to /dev/null
		return unix.Mknod(a[0], unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
	case "symlink": // symlink(target, linkpath)
		return unix.Symlink(a[0], a[1])
	case "link":
		return unix.Link(a[0], a[1])
	case "rename":
		return unix.Rename(a[0], a[1])
	case "exchange":
		return unix.Renameat2(unix.AT_FDCWD, a[0], unix.AT_FDCWD, a[1], unix.RENAME_EXCHANGE)
	case "chmod":
		return unix.Chmod(a[0], 0o600)
	case "chown":
		return unix.Chown(a[0], 1000, 1000)
	case "setxattr":
		return unix.Setxattr(a[0], "trusted.oxs", []byte("x"), 0)
	case "utimes":
		ts := []unix.Timespec{unix.NsecToTimespec(time.Unix(1000, 0).UnixNano()), unix.NsecToTimespec(time.Unix(1000, 0).UnixNano())}
		return unix.UtimesNano(a[0], ts)
	case "mkdirp-write": // mkdir a[0] then write a[0]/a[1]
		if err := unix.Mkdir(a[0], 0o755); err != nil {
			return err
		}
		return os.WriteFile(a[0]+"/"+a[1], []byte("x"), 0o644)
	}
	return fmt.Errorf("unknown helper op %q", op)
}

var _ = syscall.EACCES
