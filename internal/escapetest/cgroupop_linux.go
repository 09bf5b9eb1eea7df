//go:build linux

package escapetest

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// childIn is what the clone3-into-cgroup op prints when the kernel
// started its child: where the child is (its cgroup v2 path).
const childIn = "child-in:"

// cloneIntoCgroup is clone3 with CLONE_INTO_CGROUP and an O_PATH
// descriptor of dir, the way out of a session's group that writes no
// cgroup.procs: the kernel then only checks write permission on the
// common ancestor's cgroup.procs, which uid 0 passes without any
// capability. The calling thread drops its capabilities first, so that
// the probe outside any session asks what a session's process (which has
// none) would be answered. Go's ForkExec makes the call (clone3 with
// CLONE_INTO_CGROUP, CLONE_VFORK and CLONE_VM: the child execs before the
// parent goes on); the child holds until the op ends, carrying marker on
// its command line. The result is the child's cgroup ("child-in:PATH"),
// or the error of clone3.
func cloneIntoCgroup(dir, marker string) (string, error) {
	// Capabilities are per thread, and the child is cloned from this one;
	// the op's process ends with it, so it stays locked.
	runtime.LockOSThread()
	var none [2]unix.CapUserData
	if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &none[0]); err != nil {
		return "", fmt.Errorf("drop capabilities: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer w.Close()
	argv := append([]string{exe}, testutil.OpArgs(OpName, "hold", marker)...)
	// The child's stdout is the op's stderr: the op's stdout is its
	// result.
	pid, err := syscall.ForkExec(exe, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{r.Fd(), os.Stderr.Fd(), os.Stderr.Fd()},
		Sys:   &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd},
	})
	r.Close()
	if err != nil {
		return "", err
	}
	// Whatever it says, the child does not outlive the op.
	defer func() {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
	}()
	cg, err := cgroup.CgroupOf(pid)
	if err != nil {
		return "", err
	}
	return childIn + cg, nil
}

// cloneArgs is the kernel's struct clone_args up to tls (its version 0,
// CLONE_ARGS_SIZE_VER0).
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls uint64
}

// clone3Plain is clone3 without CLONE_INTO_CGROUP: a fork whose child
// exits at once with status 0, without touching the Go runtime (it is a
// copy of this one thread only), and which the parent reaps. It fails
// with the error of clone3, or when the child did not exit 0.
func clone3Plain() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	args := cloneArgs{exitSignal: uint64(unix.SIGCHLD)}
	pid, _, errno := syscall.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
	if errno != 0 {
		return errno
	}
	if pid == 0 {
		syscall.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(int(pid), &ws, 0, nil); err != nil {
		return fmt.Errorf("wait for the clone3 child %d: %w", pid, err)
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return fmt.Errorf("the clone3 child %d ended with status %v", pid, ws)
	}
	return nil
}

// hold is the child of cloneIntoCgroup: it waits for the end of its
// stdin (the op's end). Its argument is only a marker.
func hold() int {
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// LiveProcessWith returns the pid of a live process whose command line
// holds marker, or 0. PID 1 here may not reap orphans: a zombie is not
// alive.
func LiveProcessWith(marker string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), marker) {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) STATE ...", where comm may hold ") ".
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X' {
			return pid, nil
		}
	}
	return 0, nil
}
