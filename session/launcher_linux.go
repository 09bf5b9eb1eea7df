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
	"unsafe"

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

	Mounts   landlock.MountPlan `json:"mounts"`
	Landlock *landlock.Ruleset  `json:"landlock,omitempty"`
	// LoopbackUp brings up lo in the launcher's private network namespace
	// (only meaningful when the supervisor cloned one).
	LoopbackUp bool `json:"loopback_up,omitempty"`
	// ExecGate makes the launcher wait at the exec gate (gateFD) after
	// building its mount namespace: the supervisor activates the layers
	// that would refuse those mounts (BPF-LSM) only then.
	ExecGate bool `json:"exec_gate,omitempty"`
}

// launchFailure is what the launcher reports on the status pipe.
type launchFailure struct {
	Layer string `json:"layer,omitempty"` // set when a boundary layer failed
	Exec  int    `json:"exec,omitempty"`  // set when exec of the command failed
	Error string `json:"error"`
}

// rootCapsDropped are removed from the bounding set when the command runs
// as root: without them root cannot remount, load modules or BPF, trace
// other processes or poke raw devices, which would undo the boundary.
var rootCapsDropped = []uintptr{
	unix.CAP_SYS_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_BPF, unix.CAP_PERFMON,
	unix.CAP_SYS_PTRACE, unix.CAP_SYS_RAWIO, unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE,
	unix.CAP_SYS_BOOT, unix.CAP_SETPCAP, unix.CAP_SYSLOG, unix.CAP_AUDIT_CONTROL,
	unix.CAP_LINUX_IMMUTABLE, unix.CAP_MKNOD, unix.CAP_SYS_CHROOT,
	// open_by_handle_at(2) reaches an inode through the mount a handle
	// names, i.e. past the read-only bind mounts on protected paths.
	unix.CAP_DAC_READ_SEARCH,
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
	if err := denyTIOCSTI(); err != nil {
		return LayerSeccomp, err
	}
	return "", nil
}

// dropPrivileges switches this thread to the target user. The raw,
// per-thread syscalls are deliberate: the thread that execs is the one whose
// credentials the command gets, and Go's all-threads variants fail in
// binaries that use cgo.
func dropPrivileges(spec *LaunchSpec) error {
	if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("clear ambient capabilities: %w", errno)
	}
	drop := rootCapsDropped
	if spec.UID != 0 {
		drop = nil
		for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
			drop = append(drop, c)
		}
	}
	// CAP_SETPCAP, needed to drop, is itself in the list: drop it last.
	for _, c := range drop {
		if c == unix.CAP_SETPCAP {
			continue
		}
		if _, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0); errno != 0 && errno != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, errno)
		}
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, unix.CAP_SETPCAP, 0); errno != 0 {
		return fmt.Errorf("drop CAP_SETPCAP from the bounding set: %w", errno)
	}
	// Root's inheritable set would pass dropped capabilities through exec
	// (root's file inheritable set is full): clear it.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear inheritable capabilities: %w", err)
	}
	if spec.UID == 0 && spec.GID == 0 {
		return nil
	}
	groups := make([]uint32, len(spec.Groups))
	for i, g := range spec.Groups {
		groups[i] = uint32(g)
	}
	var gp uintptr
	if len(groups) > 0 {
		gp = uintptr(unsafe.Pointer(&groups[0]))
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), gp, 0); errno != 0 {
		return fmt.Errorf("setgroups %v: %w", spec.Groups, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(spec.GID), uintptr(spec.GID), uintptr(spec.GID)); errno != 0 {
		return fmt.Errorf("setresgid %d: %w", spec.GID, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(spec.UID), uintptr(spec.UID), uintptr(spec.UID)); errno != 0 {
		return fmt.Errorf("setresuid %d: %w", spec.UID, errno)
	}
	return nil
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
