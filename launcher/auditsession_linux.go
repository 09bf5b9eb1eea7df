//go:build linux

package launcher

import (
	"bytes"
	"strconv"

	"golang.org/x/sys/unix"
)

// unsetLoginUID is /proc/self/loginuid of a task that never logged in.
const unsetLoginUID = "4294967295"

// loginUIDFile is the calling thread's login uid: per thread, and the one
// that execs passes it on.
const loginUIDFile = "/proc/thread-self/loginuid"

// newAuditSession gives the launcher, and so every process of the session,
// a kernel audit session id of its own: writing /proc/self/loginuid
// allocates one. The login uid is kept when it is set (the user who logged
// in stays the actor) and becomes the session's user when it is not. It is
// how a seccomp refusal is attributed after its process exited (the
// AUDIT_SECCOMP record carries ses= and nothing else that outlives the
// process). Failure is not fatal: a kernel without audit, or one with
// loginuid immutable, only loses that attribution.
//
// Plain syscalls, not os.ReadFile and os.WriteFile: those set up the
// runtime's poller for the file (an epoll instance, an eventfd, a
// refused registration and flag changes, ~15 syscalls) on the way to
// the exec gate, and nothing else in the launcher needs it.
func newAuditSession(uid int) {
	var buf [32]byte
	n, err := readSmall(loginUIDFile, buf[:])
	if err != nil {
		return
	}
	login := bytes.TrimSpace(buf[:n])
	if string(login) == unsetLoginUID {
		login = strconv.AppendInt(nil, int64(uid), 10)
	}
	fd, err := unix.Open(loginUIDFile, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_, _ = unix.Write(fd, login)
	unix.Close(fd)
}

// readSmall reads the file at path, which fits in buf, with one read.
func readSmall(path string, buf []byte) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return unix.Read(fd, buf)
}
