// Command fsop performs one filesystem operation with a raw syscall and
// prints "OK" or the errno name (EACCES, EROFS, ...), so tests can assert
// the exact errno a session's boundary returns.
//
//	fsop write PATH | append PATH | read PATH | truncate PATH | mkdir PATH |
//	     unlink PATH | rmdir PATH | rename OLD NEW | exchange A B |
//	     link OLD NEW | symlink TARGET LINK | mknod PATH | chmod PATH |
//	     chown PATH | utimes PATH | socket DOMAIN TYPE | io_uring_setup - |
//	     connect IPV4:PORT | bind IPV4:PORT | loopback | tiocsti TEXT
//
// connect makes one TCP connection; loopback listens on 127.0.0.1 and
// connects to itself (the session's own loopback traffic). tiocsti pushes
// TEXT into the input queue of the terminal on stdin, as keystrokes.
package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 3 && !(len(os.Args) == 2 && os.Args[1] == "loopback") {
		fmt.Fprintln(os.Stderr, "usage: fsop OP PATH [PATH]")
		os.Exit(2)
	}
	op, a := os.Args[1], ""
	if len(os.Args) > 2 {
		a = os.Args[2]
	}
	b := ""
	if len(os.Args) > 3 {
		b = os.Args[3]
	}
	err := do(op, a, b)
	var errno unix.Errno
	switch {
	case err == nil:
		fmt.Println("OK")
	case errors.As(err, &errno):
		fmt.Println(unix.ErrnoName(errno))
	default:
		fmt.Println("ERROR", err)
	}
}

func do(op, a, b string) error {
	switch op {
	case "write", "append":
		flags := unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC
		if op == "append" {
			flags = unix.O_WRONLY | unix.O_APPEND
		}
		fd, err := unix.Open(a, flags|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, []byte("written by fsop\n"))
		return err
	case "read":
		fd, err := unix.Open(a, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		buf := make([]byte, 64)
		_, err = unix.Read(fd, buf)
		return err
	case "truncate":
		return unix.Truncate(a, 0)
	case "mkdir":
		return unix.Mkdir(a, 0o755)
	case "unlink":
		return unix.Unlink(a)
	case "rmdir":
		return unix.Rmdir(a)
	case "rename":
		return unix.Rename(a, b)
	case "exchange":
		return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	case "link":
		return unix.Link(a, b)
	case "symlink":
		return unix.Symlink(a, b)
	case "mknod":
		return unix.Mknod(a, unix.S_IFIFO|0o644, 0)
	case "chmod":
		return unix.Chmod(a, 0o777)
	case "chown":
		return unix.Chown(a, 65534, 65534)
	case "utimes":
		return unix.UtimesNano(a, []unix.Timespec{{Sec: 1}, {Sec: 1}})
	case "connect":
		ap, err := netip.ParseAddrPort(a)
		if err != nil || !ap.Addr().Is4() {
			return fmt.Errorf("connect: want IPV4:PORT, got %q", a)
		}
		return tcpConnect(&unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())})
	case "socket":
		domain, err1 := strconv.Atoi(a)
		typ, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("socket: want numeric DOMAIN TYPE, got %q %q", a, b)
		}
		fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
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
		unix.Close(int(fd))
		return nil
	case "bind":
		ap, err := netip.ParseAddrPort(a)
		if err != nil || !ap.Addr().Is4() {
			return fmt.Errorf("bind: want IPV4:PORT, got %q", a)
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Bind(fd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())})
	case "tiocsti":
		keys := []byte(a)
		for i := range keys {
			if _, _, errno := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&keys[i]))); errno != 0 {
				return errno
			}
		}
		return nil
	case "loopback":
		ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(ln)
		if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return err
		}
		if err := unix.Listen(ln, 1); err != nil {
			return err
		}
		sa, err := unix.Getsockname(ln)
		if err != nil {
			return err
		}
		return tcpConnect(sa)
	}
	return fmt.Errorf("unknown op %q", op)
}

func tcpConnect(sa unix.Sockaddr) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, sa)
}
