//go:build linux

package escapetest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// OpName is the name under which a test binary registers Op with
// testutil.RunOp.
const OpName = "escape"

// Op performs one step of the table with a raw syscall and prints "OK" or
// the errno name (capeff prints the effective capability set instead):
//
//	write PATH | read PATH | mkdir PATH | rename OLD NEW | symlink TARGET LINK |
//	chmod PATH | chown PATH | utimes PATH | mknod-char PATH | setuid UID |
//	socket DOMAIN TYPE [PROTOCOL] | io_uring_setup | unix-connect PATH|@ABSTRACT | capeff |
//	clone3-into-cgroup DIR MARKER | clone3-plain
//
// clone3-into-cgroup prints "child-in:PATH" when the kernel started its
// child (in cgroup PATH) instead of an errno; its child runs the op hold.
// clone3-plain is clone3 without CLONE_INTO_CGROUP (a fork), the control
// of what a session may still do.
// It asserts nothing: the outcome is the test's to judge.
func Op(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: escape OP [ARGS...]")
		return 2
	}
	switch {
	case args[0] == "hold":
		return hold()
	case args[0] == "clone3-plain" && len(args) == 1:
		return testutil.ReportErrnoName(clone3Plain())
	case args[0] == "clone3-into-cgroup" && len(args) == 3:
		where, err := cloneIntoCgroup(args[1], args[2])
		if err != nil {
			return testutil.ReportErrnoName(err)
		}
		fmt.Println(where)
		return 0
	}
	if args[0] == "capeff" {
		eff, err := capEff()
		if err != nil {
			fmt.Println("ERROR", err)
			return 0
		}
		fmt.Println(eff)
		return 0
	}
	err := do(args[0], args[1:])
	return testutil.ReportErrnoName(err)
}

// errUsage is an op called with the wrong arguments.
var errUsage = errors.New("escape op: bad arguments")

func do(op string, a []string) error {
	arg := func(i int) string {
		if i < len(a) {
			return a[i]
		}
		return ""
	}
	switch op {
	case "write":
		fd, err := unix.Open(arg(0), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, []byte("written in the session\n"))
		return err
	case "read":
		fd, err := unix.Open(arg(0), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "mkdir":
		return unix.Mkdir(arg(0), 0o755)
	case "rename":
		return unix.Rename(arg(0), arg(1))
	case "symlink":
		return unix.Symlink(arg(0), arg(1))
	case "chmod":
		return unix.Chmod(arg(0), 0o777)
	case "chown":
		return unix.Chown(arg(0), 65534, 65534)
	case "utimes":
		return unix.UtimesNano(arg(0), []unix.Timespec{{Sec: 1}, {Sec: 1}})
	case "mknod-char":
		// /dev/null's numbers: a device node needs CAP_MKNOD.
		return unix.Mknod(arg(0), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
	case "setuid":
		uid, err := strconv.Atoi(arg(0))
		if err != nil {
			return fmt.Errorf("%w: setuid %q", errUsage, arg(0))
		}
		// The raw syscall on this thread: the outcome of one setuid(2),
		// not of the runtime's all-threads emulation.
		if _, _, errno := unix.RawSyscall(unix.SYS_SETUID, uintptr(uid), 0, 0); errno != 0 {
			return errno
		}
		return nil
	case "socket":
		proto := "0"
		if len(a) > 2 {
			proto = a[2]
		}
		domain, err1 := strconv.Atoi(arg(0))
		typ, err2 := strconv.Atoi(arg(1))
		protocol, err3 := strconv.Atoi(proto)
		if err1 != nil || err2 != nil || err3 != nil {
			return fmt.Errorf("%w: socket %q %q %q", errUsage, arg(0), arg(1), proto)
		}
		fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, protocol)
		if err == nil {
			unix.Close(fd)
		}
		return err
	case "io_uring_setup":
		var params [120]byte // struct io_uring_params
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])), 0)
		if errno != 0 {
			return errno
		}
		return unix.Close(int(fd))
	case "unix-connect":
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		// golang.org/x/sys/unix turns a leading '@' into the abstract
		// namespace's NUL.
		return unix.Connect(fd, &unix.SockaddrUnix{Name: arg(0)})
	}
	return fmt.Errorf("%w: unknown op %q", errUsage, op)
}

// capEff is the CapEff line of /proc/self/status: what the kernel says
// this process may do, not what a library thinks.
func capEff() (string, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("no CapEff in /proc/self/status")
}
