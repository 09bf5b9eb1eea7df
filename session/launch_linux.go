//go:build linux

package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/companion"
	"github.com/openoxide/oxsupervise/launcher"
)

// launched is a launcher started in a session's group. Until it is given
// its LaunchSpec (as soon as its session has one, or when a request
// claims it: a daemon's Slot) it waits for it on its spec channel; then
// it builds its mount namespace and waits at its exec gate, and so runs
// nothing of the command, while the supervisor finishes the session's
// set-up (the registry entry, the audit sink, the layers). Nothing it was
// given at fork depends on the session: the spec brings the session's
// descriptors (launcher.SendSpec).
type launched struct {
	cmd      *exec.Cmd
	specConn *os.File // the spec channel; the exec gate after the spec
	statusR  *os.File // EOF: the command was executed
	sigs     chan os.Signal
	// program is the launcher that was executed, for the session's
	// records (Entry.Launcher).
	program string
	// unlock ends the lock of the thread that forked the launcher (its
	// parent-death signal is that thread's) once the launcher is gone.
	unlock func()
}

// launcherExec is a session's launcher, ready to be started.
type launcherExec struct {
	// cmd executes it; the caller sets the standard streams and
	// SysProcAttr.
	cmd *exec.Cmd
	// program names it for the session's records (Entry.Launcher): the
	// launcher program's path, or the re-executed binary and LauncherVerb.
	program string
	// prog is the launcher program, nil for a re-executed binary.
	prog *companion.Program
}

// close releases the launcher program's descriptor once the launcher
// started (or will not be).
func (x *launcherExec) close() {
	if x.prog != nil {
		x.prog.Close()
	}
}

// launcherEnv is the launcher's own environment (the command gets
// Spec.Env at the exec). GOMAXPROCS=1: the launcher runs one goroutine,
// on its locked thread, for the ~2 ms from its start to the exec, and a
// Go runtime with one P starts fewer threads (no second P for its
// start-up goroutines to wake an M for), which the exec must then kill
// and wait for, and takes less of the CPU the supervisor shares with it
// (measured on 2 CPUs: ~0.2 ms less to the exec gate and ~0.25 ms less
// from the gate to the exec).
func launcherEnv() []string { return []string{"GOMAXPROCS=1"} }

// launcherCommand is the one place that decides which launcher a session
// uses (Run, standalone or for the daemon, and RunNested), to be executed
// with extra as its descriptors 3, 4, ...:
//   - selfExe, when the caller names one (a test binary that is its own
//     launcher), executed with LauncherVerb;
//   - else the launcher program installed beside oxsupervise
//     (companion.Launcher, a program of the standard library and x/sys
//     only), executed through the descriptor of the file that was checked,
//     passed as its last extra descriptor;
//   - else, when none is installed (a `go build` of cmd/oxsupervise
//     alone), this binary re-executed with LauncherVerb: the same launcher
//     (package launcher), slower to start (`oxsupervise doctor` says so).
//
// A launcher program that fails its check (owner, mode) is an error, not
// a reason to fall back: nothing runs.
func launcherCommand(selfExe string, extra []*os.File) (*launcherExec, error) {
	x := &launcherExec{cmd: &exec.Cmd{Path: selfExe, Args: []string{"oxsupervise", LauncherVerb}, Env: launcherEnv(), ExtraFiles: extra}}
	if selfExe != "" {
		x.program = selfExe + " " + LauncherVerb
		return x, nil
	}
	prog, err := companion.Find(companion.Launcher)
	switch {
	case errors.Is(err, companion.ErrNotFound):
		self, _ := os.Executable()
		x.cmd.Path, x.program = "/proc/self/exe", self+" "+LauncherVerb
		return x, nil
	case err != nil:
		return nil, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("the session launcher: %w", err)}
	}
	x.prog, x.program = prog, prog.Path
	x.cmd.ExtraFiles = append(extra[:len(extra):len(extra)], prog.File)
	x.cmd.Path = companion.ExecPath(3 + len(extra))
	x.cmd.Args = []string{companion.Launcher}
	return x, nil
}

// launchFailed is the result of a launcher that reported status, its
// launcher.Failure, instead of executing the command; a status that does
// not decode is a failure of layer unreadable.
func launchFailed(status []byte, unreadable string) (int, error) {
	var f launcher.Failure
	if err := json.Unmarshal(status, &f); err != nil {
		return 0, &BoundaryError{Layer: unreadable, Err: fmt.Errorf("launcher: %s", status)}
	}
	if f.Exec != 0 {
		return f.Exec, &ExecError{f.Exec, errors.New(f.Error)}
	}
	return 0, &BoundaryError{Layer: stepLayer(f.Step), Err: errors.New(f.Error)}
}

// stepLayer is the layer of the session a step of the launcher builds.
func stepLayer(s launcher.Step) string {
	switch s {
	case launcher.StepLoopback:
		return LayerNetNS
	case launcher.StepExecGate:
		return LayerBPFLSM
	case launcher.StepLandlock:
		return LayerLandlock
	case launcher.StepCredentials:
		return "credentials"
	case launcher.StepSeccomp:
		return LayerSeccomp
	}
	// Reading the spec, the mounts, the inherited descriptors: the
	// launcher's own set-up, in the namespace it was born in.
	return LayerMountNS
}

// WarmLaunch makes, on a goroutine of its own, the one-time check the
// first process start of this program waits for: package os probes once
// whether pidfds work (pidfd_open, waitid, pidfd_send_signal, and a
// vfork of this process with CLONE_PIDFD that exits at once: 0.1-0.35 ms
// on 2 CPUs), and the first exec.Cmd.Start, a session's launcher, would
// make it on the session's critical path. A standalone supervisor calls it
// as it starts, so the probe runs while the policy is resolved. Calling
// it is never needed for correctness: without it the first start makes
// the same check.
func WarmLaunch() {
	go func() {
		// FindProcess makes the probe (os.pidfdWorks) and opens a pidfd
		// of this process, released at once.
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Release()
		}
	}()
}

// startLauncher starts the launcher of a session in group, in a new
// mount namespace (and network namespace with netns). The calling
// goroutine stays locked to its thread until release: the parent-death
// signal is the forking thread's.
func startLauncher(opts RunOptions, group *cgroup.Group, netns bool) (*launched, error) {
	runtime.LockOSThread()
	// The signals the session forwards are registered while the launcher
	// starts (a round trip to the runtime's signal thread for each signal
	// nothing else registered): before it returns, so before the launcher
	// gets its spec and can run anything.
	registered := make(chan chan os.Signal, 1)
	go func() { registered <- notifySessionSignals() }()
	l, err := forkLauncher(opts.SelfExe, group, netns)
	sigs := <-registered
	if err != nil {
		signal.Stop(sigs)
		runtime.UnlockOSThread()
		return nil, err
	}
	l.sigs, l.unlock = sigs, runtime.UnlockOSThread
	return l, nil
}

// notifySessionSignals registers for the signals a session's supervisor
// forwards to its command (launched.run).
func notifySessionSignals() chan os.Signal {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	return sigs
}

// forkLauncher starts a launcher (launcherCommand) directly into group
// (CLONE_INTO_CGROUP: no migration, which would wait for an RCU grace
// period), in a new mount namespace (and network namespace with netns),
// with the parent-death signal SIGKILL, its standard streams /dev/null
// until its spec brings the session's. The caller has locked its
// goroutine to its thread and keeps it so until the launcher is gone.
func forkLauncher(selfExe string, group *cgroup.Group, netns bool) (*launched, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	cgFD, err := group.OpenFD()
	if err != nil {
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	files = append(files, cgFD)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		closeAll()
		return nil, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("spec channel: %w", err)}
	}
	specConn, specChild := os.NewFile(uintptr(fds[0]), "spec"), os.NewFile(uintptr(fds[1]), "spec-launcher")
	files = append(files, specChild)
	statusR, statusW, err := statusPipe()
	if err != nil {
		closeAll()
		specConn.Close()
		return nil, &BoundaryError{Layer: LayerMountNS, Err: err}
	}
	files = append(files, statusW)
	fail := func(err error) (*launched, error) {
		closeAll()
		specConn.Close()
		statusR.Close()
		return nil, err
	}
	// launcher.SpecFD, launcher.StatusFD
	x, err := launcherCommand(selfExe, []*os.File{specChild, statusW})
	if err != nil {
		return fail(err)
	}
	defer x.close()
	cloneflags := uintptr(syscall.CLONE_NEWNS)
	if netns {
		cloneflags |= syscall.CLONE_NEWNET
	}
	x.cmd.SysProcAttr = &syscall.SysProcAttr{
		UseCgroupFD: true,
		CgroupFD:    int(cgFD.Fd()),
		Cloneflags:  cloneflags,
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := x.cmd.Start(); err != nil {
		return fail(&BoundaryError{Layer: LayerCgroup, Err: fmt.Errorf("start launcher in %s: %w", group.Path, err)})
	}
	// The launcher's ends, now its own.
	closeAll()
	return &launched{cmd: x.cmd, specConn: specConn, statusR: statusR, program: x.program}, nil
}

// statusPipe is a launcher's status pipe (launcher.StatusFD, close-on-exec
// in the launcher: EOF means the command was executed). The supervisor's
// end blocks: the read that waits for the exec blocks its thread, and the
// EOF wakes that thread. On a non-blocking pipe (os.Pipe) the EOF woke
// the runtime's network poller first, which then handed the goroutine to
// the thread it is locked to (startLauncher): a second wake-up between
// the exec and the supervisor learning of it.
func statusPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("status pipe: %w", err)
	}
	return os.NewFile(uintptr(p[0]), "status"), os.NewFile(uintptr(p[1]), "status-launcher"), nil
}

func (l *launched) pid() int { return l.cmd.Process.Pid }

// release ends what startLauncher (or a Slot and its claim) set up for
// the launcher's life.
func (l *launched) release() {
	// Nothing reads sigs any more; the deregistration (as costly as the
	// registration when no other channel has the signal) need not be
	// waited for.
	go signal.Stop(l.sigs)
	l.specConn.Close()
	l.statusR.Close()
	l.unlock()
}

// abort kills a launcher that has not passed its exec gate (it ran
// nothing of the command) and waits for it.
func (l *launched) abort() {
	l.cmd.Process.Kill()
	l.cmd.Wait()
	l.release()
}

// waiting reports whether the launcher still waits for its spec: its
// status pipe is neither readable nor closed (a launcher that died or
// failed closes it).
func (l *launched) waiting() bool {
	fds := []unix.PollFd{{Fd: int32(l.statusR.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 0
}

// send gives the launcher its spec, with opts' standard streams and shm,
// the session's private /dev/shm (spec.Mounts.PrivateShm), as soon as the
// launcher exists: it builds its mount namespace while the supervisor
// finishes the session's set-up, and execs only once run opened its exec
// gate (spec.ExecGate, always set by Run). Until then killing it (abort)
// undoes it: nothing of the command ran.
func (l *launched) send(opts RunOptions, spec LaunchSpec, shm *os.File) error {
	if err := launcher.SendSpec(l.specConn, spec, launcher.Descriptors{Stdin: orStd(opts.Stdin, os.Stdin), Stdout: orStd(opts.Stdout, os.Stdout), Stderr: orStd(opts.Stderr, os.Stderr), Shm: shm}); err != nil {
		return &BoundaryError{Layer: LayerMountNS, Err: err}
	}
	return nil
}

// run waits for the launcher (given its spec by send) at its exec gate,
// which it reaches once its mount namespace is built; activate applies
// the gated layers then, while the launcher narrows itself (Landlock,
// credentials, seccomp), and the launcher execs only once activate
// succeeded, so nothing of the command runs without them. Run calls it
// once everything else of the session is in place. The caller releases
// l once the session has settled (runEnd.release): its signal relay no
// longer forwards anything, and undoing it waits for the runtime
// (signal.Stop).
func (l *launched) run(ctx context.Context, opts RunOptions, entry *Entry, aud *auditor, activate func() error) (int, error) {
	tm := opts.Timing
	cmd := l.cmd
	// failed ends a launcher that did not pass its gate, so exec'd
	// nothing: its status says why, else err does.
	failed := func(err error) (int, error) {
		cmd.Process.Kill()
		cmd.Wait()
		if status, _ := io.ReadAll(l.statusR); len(status) > 0 {
			return launchFailed(status, LayerMountNS)
		}
		return 0, &BoundaryError{Layer: LayerMountNS, Err: err}
	}
	var msg [1]byte
	if n, err := l.specConn.Read(msg[:]); n != 1 || msg[0] != launcher.GateMountsDone {
		// EOF: the launcher failed (or was killed) before its mounts
		// were done.
		return failed(fmt.Errorf("the launcher did not reach its exec gate (%v)", err))
	}
	tm.Mark("launcher at the exec gate")
	if err := activate(); err != nil {
		// The launcher has not exec'd: nothing of the command ran.
		cmd.Process.Kill()
		cmd.Wait()
		return 0, err
	}
	if _, err := l.specConn.Write([]byte{launcher.GateGo}); err != nil {
		// The launcher went away at the gate: it failed in what it does
		// while the layers are activated (its status says what), or was
		// killed.
		return failed(fmt.Errorf("open the exec gate: %w", err))
	}
	tm.Mark("gated layers applied")
	l.specConn.Close()

	status, _ := io.ReadAll(l.statusR)
	tm.Mark("command executed")
	if len(status) > 0 {
		cmd.Wait()
		return launchFailed(status, LayerMountNS)
	}
	// The command runs: signals reach it from now on, before its
	// session_start is written (a signal that came while the launcher
	// waited, or while the record was written, would otherwise reach a
	// short command only once it has ended).
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-l.sigs:
				if (s == unix.SIGINT || s == unix.SIGQUIT || s == unix.SIGWINCH) && sameForegroundGroup() {
					// The terminal already delivered it to the command.
					continue
				}
				cmd.Process.Signal(s)
			}
		}
	}()
	// The registry entry has the pid and launcher since Run put it: the
	// launcher is the command now (a second write cost ~0.3 ms of /run).
	aud.sessionStart(entry)
	tm.Mark("session_start recorded")
	err := cmd.Wait()
	close(done)
	tm.Mark("command exited")
	if code, ok := ExitStatus(err); ok {
		return code, nil
	}
	return 0, fmt.Errorf("wait for session %s: %w", entry.ID, err)
}

// orStd is f, or std (the supervisor's own stream) when f is nil.
func orStd(f, std *os.File) *os.File {
	if f == nil {
		return std
	}
	return f
}
