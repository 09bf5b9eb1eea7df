// Command fsop performs one filesystem operation with a raw syscall and
// prints "OK" or the errno name (EACCES, EROFS, ...), so tests can assert
// the exact errno a session's boundary returns.
//
//	fsop write PATH | append PATH | read PATH | truncate PATH | mkdir PATH |
//	     unlink PATH | rmdir PATH | rename OLD NEW | exchange A B |
//	     link OLD NEW | symlink TARGET LINK | mknod PATH | chmod PATH
package main

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: fsop OP PATH [PATH]")
		os.Exit(2)
	}
	op, a := os.Args[1], os.Args[2]
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
	}
	return fmt.Errorf("unknown op %q", op)
}
