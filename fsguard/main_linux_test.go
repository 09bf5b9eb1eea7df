//go:build linux

package fsguard_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// The test binary's helper process (testutil.RunOp): "fs OP ARGS..."
// performs one filesystem operation (runOp) and prints its errno (0 for
// success), so tests run the real syscall from inside a session's cgroup.
var ops = map[string]testutil.Op{"fs": fsOp, "unixpeer": unixPeerOp}

// fsArgs is the helper command line, after the executable, for op.
func fsArgs(op string, args ...string) []string {
	return testutil.OpArgs("fs", append([]string{op}, args...)...)
}

// notDelivered is what the helper prints when an fd sent over SCM_RIGHTS
// did not arrive (recvmsg succeeded with MSG_CTRUNC and no rights).
const notDelivered = 1000

var errNotDelivered = errors.New("fd not delivered")

func TestMain(m *testing.M) {
	testutil.RunOp(ops)
	code := m.Run()
	if err := closeSharedGuard(); err != nil {
		fmt.Fprintln(os.Stderr, "close the shared guard:", err)
		code = 1
	}
	os.Exit(code)
}

func fsOp(args []string) int {
	err := runOp(args[0], args[1:])
	if errors.Is(err, errNotDelivered) {
		fmt.Println(notDelivered)
		return 0
	}
	return testutil.ReportErrno(err)
}

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
	case "procfd-reopen": // open a[0] read-only, reopen it for writing through /proc/self/fd
		fd, err := unix.Open(a[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("read-only open: %w", err)
		}
		defer unix.Close(fd)
		wfd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(wfd)
		_, err = unix.Write(wfd, []byte(a[1]))
		return err
	case "chroot-write": // keep a dir fd to a[0], chroot into a[1], write a[0]/a[2] through the fd
		dfd, err := unix.Open(a[0], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open dir: %w", err)
		}
		if err := unix.Chroot(a[1]); err != nil {
			return fmt.Errorf("chroot: %w", err)
		}
		fd, err := unix.Openat(dfd, a[2], unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, []byte("chroot"))
		return err
	case "recvfd-write": // receive an fd on fd 3 and write a[0] through it
		buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
		_, oobn, flags, _, err := unix.Recvmsg(3, buf, oob, 0)
		if err != nil {
			return fmt.Errorf("recvmsg: %w", err)
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return fmt.Errorf("parse control message: %w", err)
		}
		if len(msgs) == 0 {
			if flags&unix.MSG_CTRUNC != 0 {
				return errNotDelivered
			}
			return errors.New("no control message and no MSG_CTRUNC")
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			return fmt.Errorf("parse rights: %v (%d fds)", err, len(fds))
		}
		_, err = unix.Write(fds[0], []byte(a[0]))
		return err
	case "openloop": // open+close a[0] a[1] times, write the ns per open to a[2]
		n, err := strconv.Atoi(a[1])
		if err != nil {
			return err
		}
		start := time.Now()
		for i := 0; i < n; i++ {
			fd, err := unix.Open(a[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			unix.Close(fd)
		}
		ns := time.Since(start).Nanoseconds() / int64(max(n, 1))
		return os.WriteFile(a[2], []byte(strconv.FormatInt(ns, 10)), 0o644)
	case "bind-mount": // bind mount a[0] on a[1]
		return unix.Mount(a[0], a[1], "", unix.MS_BIND, "")
	case "umount":
		return unix.Unmount(a[0], 0)
	case "sleep":
		time.Sleep(time.Minute)
		return nil
	case "bpf": // create a one-entry array map
		attr := struct{ mapType, keySize, valueSize, maxEntries uint32 }{2, 4, 4, 1}
		fd, _, errno := unix.Syscall(unix.SYS_BPF, 0 /* BPF_MAP_CREATE */, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if errno != 0 {
			return errno
		}
		return unix.Close(int(fd))
	case "kill": // kill(pid, sig); "self" for our own pid
		pid := os.Getpid()
		if a[0] != "self" {
			pid, _ = strconv.Atoi(a[0])
		}
		sig, _ := strconv.Atoi(a[1])
		return unix.Kill(pid, unix.Signal(sig))
	case "ptrace":
		pid, _ := strconv.Atoi(a[0])
		runtime.LockOSThread()
		if err := unix.PtraceAttach(pid); err != nil {
			return err
		}
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		return unix.PtraceDetach(pid)
	case "environ":
		_, err := os.ReadFile("/proc/" + a[0] + "/environ")
		var errno unix.Errno
		if errors.As(err, &errno) {
			return errno
		}
		return err
	case "tiocsti": // inject a byte into a fresh pseudo-terminal
		fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open /dev/ptmx: %w", err)
		}
		defer unix.Close(fd)
		c := byte('x')
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		if errno != 0 {
			return errno
		}
		return nil
	case "join-mmap", "join-mprotect": // open a[0] read-write (or map it read-only), join cgroup a[1], then map it shared writable
		return joinThenMap(op, a[0], a[1])
	case "mmap-write": // open a[0] read-write, map it shared writable, store a[1] through the mapping
		fd, err := unix.Open(a[0], unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		defer unix.Close(fd)
		return storeThroughMapping(fd, a[1])
	case "memfd-mmap": // memfd_create, size it, map it shared writable
		fd, err := unix.MemfdCreate("oxs-test", unix.MFD_CLOEXEC)
		if err != nil {
			return fmt.Errorf("memfd_create: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.Ftruncate(fd, 4096); err != nil {
			return fmt.Errorf("ftruncate memfd: %w", err)
		}
		return storeThroughMapping(fd, "memfd")
	case "netlink-proto": // socket(AF_NETLINK, SOCK_RAW, a[0]): an unregistered protocol makes the kernel request its module
		proto, _ := strconv.Atoi(a[0])
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "socketpair": // an AF_UNIX stream pair, one byte across it
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		if _, err := unix.Write(fds[0], []byte("x")); err != nil {
			return err
		}
		_, err = unix.Read(fds[1], make([]byte, 1))
		return err
	case "socket-type": // socket(a[0], a[1], 0)
		family, _ := strconv.Atoi(a[0])
		typ, _ := strconv.Atoi(a[1])
		fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "finit-module": // finit_module on the file a[0]
		fd, err := unix.Open(a[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		defer unix.Close(fd)
		return unix.FinitModule(fd, "", 0)
	case "init-module": // init_module on a buffer that is not a module
		// Longer than an ELF header, so the kernel gets past its size check.
		return unix.InitModule(make([]byte, 256), "")
	case "unix-connect": // connect a stream socket to the pathname a[0]
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		defer unix.Close(fd)
		return unix.Connect(fd, &unix.SockaddrUnix{Name: a[0]})
	case "unix-sendto": // send a datagram to the pathname a[0]
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, []byte("x"), 0, &unix.SockaddrUnix{Name: a[0]})
	case "write-file": // open O_WRONLY|O_CREAT, write a[1] (os.WriteFile semantics)
		return os.WriteFile(a[0], []byte(a[1]), 0o644)
	case "mkdirp-write": // mkdir a[0] then write a[0]/a[1]
		if err := unix.Mkdir(a[0], 0o755); err != nil {
			return err
		}
		return os.WriteFile(a[0]+"/"+a[1], []byte("x"), 0o644)
	}
	return fmt.Errorf("unknown helper op %q", op)
}

var _ = syscall.EACCES

// joinThenMap holds a file open from before the session, as a process
// that `attach` moves in does, then tries to map it shared and writable.
func joinThenMap(op, file, cgroupDir string) error {
	flags, prot := unix.O_RDWR, unix.PROT_READ|unix.PROT_WRITE
	if op == "join-mprotect" {
		prot = unix.PROT_READ
	}
	fd, err := unix.Open(file, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open before joining: %w", err)
	}
	defer unix.Close(fd)
	var mem []byte
	if op == "join-mprotect" {
		if mem, err = unix.Mmap(fd, 0, 4096, prot, unix.MAP_SHARED); err != nil {
			return fmt.Errorf("read-only shared map before joining: %w", err)
		}
		defer unix.Munmap(mem)
	}
	if err := os.WriteFile(cgroupDir+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("join %s: %w", cgroupDir, err)
	}
	if op == "join-mprotect" {
		if err := unix.Mprotect(mem, unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return err
		}
		copy(mem, "mprotect")
		return unix.Msync(mem, unix.MS_SYNC)
	}
	return storeThroughMapping(fd, "mmap")
}

func storeThroughMapping(fd int, data string) error {
	mem, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(mem)
	copy(mem, data)
	return unix.Msync(mem, unix.MS_SYNC)
}
