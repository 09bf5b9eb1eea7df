//go:build linux

package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Main is the launcher process: it builds the boundary inside the session
// cgroup and private mount namespace it was born in, then execs the
// command. It returns only on failure, with the exit code to use: 125 when
// the boundary could not be built (nothing ran), 126 or 127 when the
// command could not be executed.
func Main() int {
	// Credentials, no_new_privs and the Landlock domain are per thread:
	// everything happens on this thread, which then execs.
	runtime.LockOSThread()
	// The supervisor, whose death must take the command with it (see
	// rearmParentDeathSignal).
	supervisor := unix.Getppid()
	status := os.NewFile(StatusFD, "status")
	fail := func(f Failure, code int) int {
		b, _ := json.Marshal(f)
		if status != nil {
			status.Write(b)
		} else {
			fmt.Fprintln(os.Stderr, f.Error)
		}
		return code
	}
	if !fdOpen(SpecFD) || !fdOpen(StatusFD) {
		fmt.Fprintln(os.Stderr, "oxsupervise: the launcher is internal and only started by `oxsupervise run`")
		return 125
	}
	// Before anything else: the spec, and the session's descriptors that
	// come with it (its stdio among them).
	spec, err := receiveSpec(SpecFD)
	if err != nil {
		unix.Close(SpecFD)
		return fail(Failure{Step: StepSpec, Error: err.Error()}, 125)
	}
	if !spec.ExecGate {
		unix.Close(SpecFD)
	}
	if step, err := buildBoundary(&spec, supervisor); err != nil {
		return fail(Failure{Step: step, Error: err.Error()}, 125)
	}
	err = unix.Exec(spec.Path, spec.Argv, spec.Env)
	code := 126
	if errors.Is(err, unix.ENOENT) {
		code = 127
	}
	return fail(Failure{Exec: code, Error: fmt.Sprintf("exec %s: %v", spec.Path, err)}, code)
}

// buildBoundary does every step before exec and names the one that failed.
func buildBoundary(spec *Spec, supervisor int) (Step, error) {
	if spec.Nested {
		return buildNested(spec, supervisor)
	}
	// Before the mounts: /proc is read-only after them.
	newAuditSession(spec.UID)
	if err := spec.Mounts.Apply(); err != nil {
		return StepMounts, err
	}
	if spec.LoopbackUp {
		if err := loopbackUp(); err != nil {
			return StepLoopback, err
		}
	}
	if spec.ExecGate {
		// From here on the session's BPF-LSM rules may apply to this
		// process too: no more mounts. Everything after this only
		// narrows what the launcher may do, and then it execs.
		if err := signalMountsDone(); err != nil {
			return StepExecGate, err
		}
	}
	// While the supervisor activates the gated layers, the launcher
	// narrows itself: none of it needs those layers, nothing of the
	// command runs before the exec, and the exec waits for the gate.
	if step, err := narrow(spec, supervisor); err != nil {
		return step, err
	}
	if spec.ExecGate {
		if err := awaitGateGo(); err != nil {
			return StepExecGate, err
		}
	}
	return "", nil
}

// narrow is everything after the mount namespace: the Landlock ruleset
// (its paths resolved in the finished namespace), the inherited
// descriptors, the credentials, the Landlock domain and the seccomp
// filter, in that order.
func narrow(spec *Spec, supervisor int) (Step, error) {
	prepared, err := spec.Landlock.Prepare()
	if err != nil {
		return StepLandlock, err
	}
	// Every inherited descriptor beyond stdio (and the ruleset and status
	// fds, and the exec gate) disappears at exec: sockets or files opened
	// outside the session would bypass its rules.
	if err := cloexecFrom(3); err != nil {
		return StepDescriptors, fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
	if err := dropPrivileges(spec); err != nil {
		return StepCredentials, err
	}
	if err := rearmParentDeathSignal(supervisor); err != nil {
		return StepCredentials, err
	}
	if err := unix.Chdir(spec.Dir); err != nil {
		return StepCredentials, fmt.Errorf("chdir %s as uid %d: %w", spec.Dir, spec.UID, err)
	}
	if prepared == nil {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return StepCredentials, fmt.Errorf("set no_new_privs: %w", err)
		}
	} else if err := prepared.RestrictSelf(); err != nil {
		return StepLandlock, err
	}
	if err := installSessionFilter(spec.RestrictSockets); err != nil {
		return StepSeccomp, err
	}
	return "", nil
}

// buildNested is buildBoundary for a nested session: everything the parent
// session's launcher built is inherited, and only what narrows it is done
// again. landlock_restrict_self stacks the child's ruleset on the parent's
// domain: an access then needs both. With spec.ExecGate (the nested run
// has the spec while the supervisor still moves this process into the
// child's group) it narrows itself meanwhile and execs only on GateGo.
func buildNested(spec *Spec, supervisor int) (Step, error) {
	if step, err := narrowNested(spec, supervisor); err != nil {
		return step, err
	}
	if spec.ExecGate {
		if err := awaitGateGo(); err != nil {
			return StepExecGate, err
		}
	}
	return "", nil
}

// narrowNested is everything a nested launcher does before its exec.
func narrowNested(spec *Spec, supervisor int) (Step, error) {
	prepared, err := spec.Landlock.Prepare()
	if err != nil {
		return StepLandlock, err
	}
	if err := cloexecFrom(3); err != nil {
		return StepDescriptors, fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
	if err := rearmParentDeathSignal(supervisor); err != nil {
		return StepCredentials, err
	}
	if err := unix.Chdir(spec.Dir); err != nil {
		return StepCredentials, fmt.Errorf("chdir %s: %w", spec.Dir, err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return StepCredentials, fmt.Errorf("set no_new_privs: %w", err)
	}
	if prepared != nil {
		if err := prepared.RestrictSelf(); err != nil {
			return StepLandlock, err
		}
	}
	if err := installSessionFilter(spec.RestrictSockets); err != nil {
		return StepSeccomp, err
	}
	return "", nil
}

// rearmParentDeathSignal sets SIGKILL as the parent-death signal again:
// the kernel clears it when the effective uid or gid changes, so after
// dropPrivileges a SIGKILLed supervisor would leave the command running
// unsupervised (its cgroup never killed). Setting it cannot cover a
// supervisor that died before, hence the check of the parent afterwards.
func rearmParentDeathSignal(supervisor int) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("set parent-death signal: %w", err)
	}
	if ppid := unix.Getppid(); ppid != supervisor {
		return fmt.Errorf("the supervisor (pid %d) exited during setup", supervisor)
	}
	return nil
}

// loopbackUp brings up lo in the launcher's new network namespace, which
// starts with lo down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up loopback: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring up loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up loopback: get flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up loopback: set flags: %w", err)
	}
	return nil
}

// signalMountsDone tells the supervisor, on the exec gate (the spec
// channel), that the mount namespace is built.
func signalMountsDone() error {
	msg := [1]byte{GateMountsDone}
	for {
		_, err := unix.Write(SpecFD, msg[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("exec gate: %w", err)
		}
		return nil
	}
}

// awaitGateGo waits until the supervisor has activated the gated layers
// (GateGo on the exec gate) and closes the gate. Anything else, the
// supervisor's end closed included, fails the launch.
func awaitGateGo() error {
	defer unix.Close(SpecFD)
	var msg [1]byte
	for {
		n, err := unix.Read(SpecFD, msg[:])
		if err == unix.EINTR {
			continue
		}
		if n != 1 || msg[0] != GateGo {
			return fmt.Errorf("exec gate: the supervisor did not activate the session's layers (%v)", err)
		}
		return nil
	}
}

func fdOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// cloexecFrom marks every descriptor >= first close-on-exec; before Linux
// 5.11 (no CLOSE_RANGE_CLOEXEC) it walks /proc/self/fd.
func cloexecFrom(first int) error {
	err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil || (err != unix.ENOSYS && err != unix.EINVAL) {
		return err
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < first {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && err != unix.EBADF {
			return fmt.Errorf("fd %d: %w", fd, err)
		}
	}
	return nil
}
