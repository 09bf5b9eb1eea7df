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

// launched is a launcher started in a session's group that has not been
// given its LaunchSpec yet: it waits for it on its spec pipe, and so can
// run nothing, while the supervisor finishes the session's set-up (the
// registry entry, the audit sink, the layers applied before exec). The
// start of the launcher process (its exec and Go's start-up) thus overlaps
// that work instead of following it.
type launched struct {
	cmd        *exec.Cmd
	specW      *os.File // the spec pipe: EOF without a spec fails the launcher
	statusR    *os.File // EOF: the command was executed
	gateParent *os.File // the exec gate, nil without one
	files      []*os.File
	sigs       chan os.Signal
	// shmFD is the launcher's fd of the private /dev/shm, 0 without one.
	shmFD int
	// program is the launcher that was executed, for the session's
	// records (Entry.Launcher).
	program string
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
	x := &launcherExec{cmd: &exec.Cmd{Path: selfExe, Args: []string{"oxsupervise", LauncherVerb}, Env: []string{}, ExtraFiles: extra}}
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

// specBytes is spec as the launcher reads it, stamped with the version of
// this build's launcher package (launcher.SpecVersion).
func specBytes(spec LaunchSpec) []byte {
	spec.Version = launcher.SpecVersion
	b, _ := json.Marshal(spec)
	return b
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

// startLauncher starts the launcher in group, in a new mount namespace
// (and network namespace with netns), with an exec gate when execGate is
// set, and shm (the session's own /dev/shm, launcher.NewPrivateShm) as
// the fd the launch spec's Mounts.ShmFD names. The calling goroutine stays locked to its thread until release:
// the parent-death signal is the forking thread's.
func startLauncher(opts RunOptions, group *cgroup.Group, netns, execGate bool, shm *os.File) (*launched, error) {
	l := &launched{}
	fail := func(err error) (*launched, error) {
		l.closeFiles()
		return nil, err
	}
	cgFD, err := group.OpenFD()
	if err != nil {
		return fail(&BoundaryError{Layer: LayerCgroup, Err: err})
	}
	l.files = append(l.files, cgFD)
	specR, specW, err := os.Pipe()
	if err != nil {
		return fail(&BoundaryError{Layer: LayerMountNS, Err: err})
	}
	l.files = append(l.files, specR, specW)
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return fail(&BoundaryError{Layer: LayerMountNS, Err: err})
	}
	l.files = append(l.files, statusR, statusW)
	l.specW, l.statusR = specW, statusR

	extra := []*os.File{specR, statusW}
	if execGate {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fail(&BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("exec gate socket: %w", err)})
		}
		l.gateParent = os.NewFile(uintptr(fds[0]), "exec-gate")
		gateChild := os.NewFile(uintptr(fds[1]), "exec-gate-launcher")
		l.files = append(l.files, l.gateParent, gateChild)
		extra = append(extra, gateChild) // launcher.GateFD
	}
	if shm != nil {
		l.shmFD = 3 + len(extra)
		extra = append(extra, shm)
	}

	x, err := launcherCommand(opts.SelfExe, extra)
	if err != nil {
		return fail(err)
	}
	defer x.close()
	cmd := x.cmd
	l.program = x.program
	cloneflags := uintptr(syscall.CLONE_NEWNS)
	if netns {
		cloneflags |= syscall.CLONE_NEWNET
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opts.Stdin, opts.Stdout, opts.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		UseCgroupFD: true,
		CgroupFD:    int(cgFD.Fd()),
		Cloneflags:  cloneflags,
		Pdeathsig:   syscall.SIGKILL,
	}
	if cmd.Stdin == nil {
		cmd.Stdin = os.Stdin
	}
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	// Pdeathsig is tied to the thread that forks: keep this goroutine on
	// one thread for the life of the session (release unlocks it).
	runtime.LockOSThread()
	// Register before the child exists so no signal falls between.
	l.sigs = make(chan os.Signal, 8)
	signal.Notify(l.sigs, unix.SIGTERM, unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	if err := cmd.Start(); err != nil {
		l.release()
		return nil, &BoundaryError{Layer: LayerCgroup, Err: fmt.Errorf("start launcher in %s: %w", group.Path, err)}
	}
	l.cmd = cmd
	// The launcher's ends, now its own.
	specR.Close()
	statusW.Close()
	if l.gateParent != nil {
		extra[launcher.GateFD-3].Close()
	}
	return l, nil
}

func (l *launched) pid() int { return l.cmd.Process.Pid }

func (l *launched) closeFiles() {
	for _, f := range l.files {
		f.Close()
	}
}

// release ends what startLauncher set up for the launcher's life.
func (l *launched) release() {
	signal.Stop(l.sigs)
	l.closeFiles()
	runtime.UnlockOSThread()
}

// abort kills a launcher that has not been given its spec (it ran
// nothing) and waits for it.
func (l *launched) abort() {
	l.cmd.Process.Kill()
	l.cmd.Wait()
	l.release()
}

// run gives the launcher spec and waits for the command. When
// spec.ExecGate is set, the launcher stops after building its mount
// namespace; activate applies the gated layers then, and the launcher
// goes on (drops privileges, applies Landlock, execs) only once it
// succeeded, so nothing of the command runs without them. The caller
// releases l once the session has settled (runEnd.release): its signal
// relay no longer forwards anything, and undoing it waits for the
// runtime (signal.Stop).
func (l *launched) run(ctx context.Context, opts RunOptions, spec LaunchSpec, entry *Entry, aud *auditor, activate func() error) (int, error) {
	tm := opts.Timing
	cmd := l.cmd
	_, werr := l.specW.Write(specBytes(spec))
	l.specW.Close()
	if l.gateParent != nil && werr == nil {
		var msg [1]byte
		// EOF: the launcher failed before its mounts were done; its
		// status says why.
		if n, _ := l.gateParent.Read(msg[:]); n == 1 && msg[0] == launcher.GateMountsDone {
			tm.Mark("launcher at the exec gate")
			if err := activate(); err != nil {
				// The launcher has not exec'd: nothing of the command ran.
				cmd.Process.Kill()
				cmd.Wait()
				return 0, err
			}
			if _, err := l.gateParent.Write([]byte{launcher.GateGo}); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				return 0, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("open the exec gate: %w", err)}
			}
		}
		l.gateParent.Close()
		tm.Mark("gated layers applied")
	}

	status, _ := io.ReadAll(l.statusR)
	tm.Mark("command executed")
	if werr != nil || len(status) > 0 {
		cmd.Wait()
		if werr != nil {
			return 0, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("send launch spec: %w", werr)}
		}
		return launchFailed(status, LayerMountNS)
	}
	entry.PID = cmd.Process.Pid
	entry.Launcher = l.program
	if err := opts.Registry.Put(*entry); err != nil {
		fmt.Fprintf(warnOrDiscard(opts.Warn), "oxsupervise: session %s: %v\n", entry.ID, err)
	}
	aud.sessionStart(entry)
	tm.Mark("session_start recorded")

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
	err := cmd.Wait()
	close(done)
	tm.Mark("command exited")
	if code, ok := ExitStatus(err); ok {
		return code, nil
	}
	return 0, fmt.Errorf("wait for session %s: %w", entry.ID, err)
}
