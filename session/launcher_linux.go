//go:build linux

package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/landlock"
)

// The launcher's inherited descriptors.
const (
	specFD   = 3 // the LaunchSpec, JSON, until EOF
	statusFD = 4 // close-on-exec: EOF means the command was executed
	// gateFD, present when LaunchSpec.ExecGate is set, is a socket to the
	// supervisor: the launcher sends gateMountsDone once its mount
	// namespace is built and waits for gateGo before it goes on.
	gateFD = 5
)

// LaunchSpec is everything the launcher needs; the supervisor computes it so
// that the launcher makes no policy decisions of its own.
type LaunchSpec struct {
	SessionID string   `json:"session_id"`
	Path      string   `json:"path"`
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir"`
	UID       int      `json:"uid"`
	GID       int      `json:"gid"`
	Groups    []int    `json:"groups"`
	// Capabilities are the only ones the command keeps (policy
	// sandbox.capabilities, by name); every other one is dropped from
	// all five sets, root included.
	Capabilities []string `json:"capabilities,omitempty"`

	Mounts   landlock.MountPlan `json:"mounts"`
	Landlock *landlock.Ruleset  `json:"landlock,omitempty"`
	// RestrictSockets makes the seccomp filter refuse socket families
	// and types the network layers cannot judge (network is not "full").
	RestrictSockets bool `json:"restrict_sockets,omitempty"`
	// LoopbackUp brings up lo in the launcher's private network namespace
	// (only meaningful when the supervisor cloned one).
	LoopbackUp bool `json:"loopback_up,omitempty"`
	// ExecGate makes the launcher wait at the exec gate (gateFD) after
	// building its mount namespace: the supervisor activates the layers
	// that would refuse those mounts (BPF-LSM) only then.
	ExecGate bool `json:"exec_gate,omitempty"`
	// Nested is a nested session's launcher (StartNested): started by
	// the nested `run` inside its parent session, which has no privilege
	// left to use. It keeps the caller's credentials, audit session and
	// mount namespace (the parent's, already built and dropped) and only
	// narrows them: the stacked Landlock domain, no_new_privs and the
	// seccomp filter.
	Nested bool `json:"nested,omitempty"`

	// privateShm is the tmpfs of Mounts.PrivateShm, made by the
	// supervisor (landlock.NewPrivateShm): launch hands it to the
	// launcher and sets Mounts.ShmFD.
	privateShm *os.File
}

// launchFailure is what the launcher reports on the status pipe.
type launchFailure struct {
	Layer string `json:"layer,omitempty"` // set when a boundary layer failed
	Exec  int    `json:"exec,omitempty"`  // set when exec of the command failed
	Error string `json:"error"`
}

// LauncherMain is the launcher process: it builds the boundary inside the
// session cgroup and private mount namespace it was born in, then execs
// the command. It returns only on failure, with the exit code to use.
func LauncherMain() int {
	// Credentials, no_new_privs and the Landlock domain are per thread:
	// everything happens on this thread, which then execs.
	runtime.LockOSThread()
	// The supervisor, whose death must take the command with it (see
	// rearmParentDeathSignal).
	supervisor := unix.Getppid()
	status := os.NewFile(statusFD, "status")
	fail := func(f launchFailure, code int) int {
		b, _ := json.Marshal(f)
		if status != nil {
			status.Write(b)
		} else {
			fmt.Fprintln(os.Stderr, f.Error)
		}
		return code
	}
	specFile := os.NewFile(specFD, "spec")
	if !fdOpen(specFD) || !fdOpen(statusFD) {
		fmt.Fprintln(os.Stderr, "oxsupervise: the launcher is internal and only started by `oxsupervise run`")
		return 125
	}
	b, err := io.ReadAll(specFile)
	specFile.Close()
	if err != nil {
		return fail(launchFailure{Layer: LayerMountNS, Error: fmt.Sprintf("read launch spec: %v", err)}, 125)
	}
	var spec LaunchSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fail(launchFailure{Layer: LayerMountNS, Error: fmt.Sprintf("decode launch spec: %v", err)}, 125)
	}
	if layer, err := buildBoundary(&spec, supervisor); err != nil {
		return fail(launchFailure{Layer: layer, Error: err.Error()}, 125)
	}
	err = unix.Exec(spec.Path, spec.Argv, spec.Env)
	code := 126
	if errors.Is(err, unix.ENOENT) {
		code = 127
	}
	return fail(launchFailure{Exec: code, Error: fmt.Sprintf("exec %s: %v", spec.Path, err)}, code)
}

// buildBoundary does every step before exec and names the layer that failed.
func buildBoundary(spec *LaunchSpec, supervisor int) (string, error) {
	if spec.Nested {
		return buildNested(spec, supervisor)
	}
	// Before the mounts: /proc is read-only after them.
	newAuditSession(spec.UID)
	if err := spec.Mounts.Apply(); err != nil {
		return LayerMountNS, err
	}
	if spec.LoopbackUp {
		if err := loopbackUp(); err != nil {
			return LayerNetNS, err
		}
	}
	if spec.ExecGate {
		// From here on the session's BPF-LSM rules apply to this process
		// too: no more mounts. Everything after this only narrows what
		// the launcher may do, and then it execs.
		if err := awaitExecGate(); err != nil {
			return LayerBPFLSM, err
		}
	}
	prepared, err := spec.Landlock.Prepare()
	if err != nil {
		return LayerLandlock, err
	}
	// Every inherited descriptor beyond stdio (and the ruleset and status
	// fds) disappears at exec: sockets or files opened outside the session
	// would bypass its rules.
	if err := cloexecFrom(3); err != nil {
		return LayerMountNS, fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
	if err := dropPrivileges(spec); err != nil {
		return "credentials", err
	}
	if err := rearmParentDeathSignal(supervisor); err != nil {
		return "credentials", err
	}
	if err := unix.Chdir(spec.Dir); err != nil {
		return "credentials", fmt.Errorf("chdir %s as uid %d: %w", spec.Dir, spec.UID, err)
	}
	if prepared == nil {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return "credentials", fmt.Errorf("set no_new_privs: %w", err)
		}
	} else if err := prepared.RestrictSelf(); err != nil {
		return LayerLandlock, err
	}
	if err := installSessionFilter(spec.RestrictSockets); err != nil {
		return LayerSeccomp, err
	}
	return "", nil
}

// buildNested is buildBoundary for a nested session: everything the parent
// session's launcher built is inherited, and only what narrows it is done
// again. landlock_restrict_self stacks the child's ruleset on the parent's
// domain: an access then needs both.
func buildNested(spec *LaunchSpec, supervisor int) (string, error) {
	prepared, err := spec.Landlock.Prepare()
	if err != nil {
		return LayerLandlock, err
	}
	if err := cloexecFrom(3); err != nil {
		return LayerMountNS, fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
	if err := rearmParentDeathSignal(supervisor); err != nil {
		return "credentials", err
	}
	if err := unix.Chdir(spec.Dir); err != nil {
		return "credentials", fmt.Errorf("chdir %s: %w", spec.Dir, err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "credentials", fmt.Errorf("set no_new_privs: %w", err)
	}
	if prepared != nil {
		if err := prepared.RestrictSelf(); err != nil {
			return LayerLandlock, err
		}
	}
	if err := installSessionFilter(spec.RestrictSockets); err != nil {
		return LayerSeccomp, err
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

// awaitExecGate tells the supervisor the mounts are done and waits until
// it has activated the gated layers.
func awaitExecGate() error {
	if !fdOpen(gateFD) {
		return errors.New("exec gate: descriptor missing")
	}
	gate := os.NewFile(gateFD, "exec-gate")
	defer gate.Close()
	if _, err := gate.Write([]byte{gateMountsDone}); err != nil {
		return fmt.Errorf("exec gate: %w", err)
	}
	var msg [1]byte
	if n, err := gate.Read(msg[:]); n != 1 || msg[0] != gateGo {
		return fmt.Errorf("exec gate: the supervisor did not activate the session's layers (%v)", err)
	}
	return nil
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
