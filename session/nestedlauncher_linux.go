//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/launcher"
)

// NestedLauncher is the launcher of a nested session's command, started
// by the nested `run` before it asks the supervisor for the session
// (StartNestedLauncher): it waits for its spec, with no rule of the child
// yet, while the supervisor builds the child and moves it into the child's
// group (NestedOptions.Launcher). That move may wait for an RCU grace period
// (cgroup_threadgroup_rwsem taken for write: up to ~10 ms); the launcher's own
// start, and its set-up once Send gave it its spec, overlap it instead of
// following it, and it execs only when Run opens its exec gate. Run or
// Abort ends it, on the goroutine that started it. The nested run exits
// once its session has ended: the relay of its signals to the command is
// left to that exit (signal.Stop is a round trip to the runtime's
// signal-mask thread per signal, on the way from the command's exit to
// the run's report of it).
type NestedLauncher struct {
	program           *launcherExec // which launcher (launcherCommand)
	cmd               *exec.Cmd
	specConn, statusR *os.File
	stdio             launcher.Descriptors // sent with the spec
	sigs              chan os.Signal
	// notified is closed once sigs is registered: the registration (a
	// round trip to the runtime's signal thread per signal, ~0.6 ms for
	// the six) runs while the launcher forks and the supervisor builds
	// the child; the spec waits for it, so every signal that comes once
	// the command can run is forwarded.
	notified chan struct{}
	// sessionID is the child's, once Send gave the launcher its spec.
	sessionID string
}

// StartNestedLauncher starts the launcher of a nested session's command,
// in this process's group (the parent session's). A *BoundaryError means
// there is none. It locks the calling goroutine to its thread (Pdeathsig
// is the forking thread's: the command dies with this run) until Run or
// Abort. stdin, stdout and stderr go to the launcher with its spec.
func StartNestedLauncher(stdin, stdout, stderr *os.File) (*NestedLauncher, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &BoundaryError{Layer: LayerLandlock, Err: fmt.Errorf("spec channel: %w", err)}
	}
	specConn, specChild := os.NewFile(uintptr(fds[0]), "spec"), os.NewFile(uintptr(fds[1]), "spec-launcher")
	defer specChild.Close()
	statusR, statusW, err := statusPipe()
	if err != nil {
		specConn.Close()
		return nil, &BoundaryError{Layer: LayerLandlock, Err: err}
	}
	defer statusW.Close()
	l := &NestedLauncher{specConn: specConn, statusR: statusR, sigs: make(chan os.Signal, 8),
		stdio: launcher.Descriptors{Stdin: stdin, Stdout: stdout, Stderr: stderr}}
	runtime.LockOSThread()
	x, err := launcherCommand("", []*os.File{specChild, statusW})
	if err != nil {
		l.release()
		return nil, err
	}
	l.program = x
	l.cmd = x.cmd
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	l.notified = make(chan struct{})
	go func() {
		defer close(l.notified)
		signal.Notify(l.sigs, unix.SIGTERM, unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	}()
	if err := l.cmd.Start(); err != nil {
		l.release()
		return nil, &BoundaryError{Layer: LayerLandlock, Err: fmt.Errorf("start the nested launcher: %w", err)}
	}
	return l, nil
}

// Pid is the launcher's pid, for the supervisor to move into the child's
// group.
func (l *NestedLauncher) Pid() int { return l.cmd.Process.Pid }

// Kill kills the launcher (and the command it became); safe from any
// goroutine.
func (l *NestedLauncher) Kill() { l.cmd.Process.Kill() }

func (l *NestedLauncher) release() {
	l.specConn.Close()
	l.statusR.Close()
	if l.program != nil {
		l.program.close()
	}
	runtime.UnlockOSThread()
}

// Abort ends a launcher that will run nothing: the supervisor refused the
// session or went away, before or after Send (the exec gate stays shut).
func (l *NestedLauncher) Abort() {
	l.cmd.Process.Kill()
	l.cmd.Wait()
	l.release()
}

// Send hands the launcher its spec (the supervisor's first answer, given
// while it still moves the launcher into the child's group): the launcher
// decodes it and narrows itself (Landlock, no_new_privs, seccomp) during
// the move, then waits at its exec gate, so nothing of the command runs
// until Run opens the gate. Only a gated spec is sent: without
// spec.ExecGate the launcher would exec at once, maybe before the move (a
// supervisor of another version), so it is refused and nothing runs.
func (l *NestedLauncher) Send(spec LaunchSpec) error {
	if !spec.ExecGate || !spec.Nested {
		return &BoundaryError{Layer: LayerLandlock, Err: errors.New("the supervisor's launch spec has no exec gate (the supervisor is of another version than this run)")}
	}
	<-l.notified
	if err := launcher.SendSpec(l.specConn, spec, l.stdio); err != nil {
		return &BoundaryError{Layer: LayerLandlock, Err: err}
	}
	l.sessionID = spec.SessionID
	return nil
}

// Run opens the exec gate of the launcher Send gave its spec (the
// supervisor has verified the launcher is in the child's group and
// written session_start) and waits for the command. A *BoundaryError
// means the command did not run.
func (l *NestedLauncher) Run(ctx context.Context) (int, error) {
	defer l.release()
	cmd := l.cmd
	// A launcher that failed in its set-up has closed its end: the write
	// fails or is never read, and its status says why.
	_, werr := l.specConn.Write([]byte{launcher.GateGo})
	l.specConn.Close()
	status, _ := io.ReadAll(l.statusR)
	if len(status) > 0 || werr != nil {
		cmd.Wait()
		if len(status) == 0 {
			return 0, &BoundaryError{Layer: LayerLandlock, Err: fmt.Errorf("open the exec gate: %w", werr)}
		}
		return launchFailed(status, LayerLandlock)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-l.sigs:
				if (s == unix.SIGINT || s == unix.SIGQUIT) && sameForegroundGroup() {
					continue
				}
				cmd.Process.Signal(s)
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	if code, ok := ExitStatus(err); ok {
		return code, nil
	}
	return 0, fmt.Errorf("wait for nested session %s: %w", l.sessionID, err)
}
