//go:build linux

package session

import (
	"context"
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
// start overlaps it instead of following it. Run or Abort ends it, on the
// goroutine that started it. The nested run exits once its session has
// ended: the relay of its signals to the command is left to that exit
// (signal.Stop is a round trip to the runtime's signal-mask thread per
// signal, on the way from the command's exit to the run's report of it).
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

// Abort ends a launcher that will get no spec: the supervisor refused the
// session or went away.
func (l *NestedLauncher) Abort() {
	l.cmd.Process.Kill()
	l.cmd.Wait()
	l.release()
}

// Run hands the launcher spec (the supervisor's answer: the launcher is in
// the child's group now) and waits for the command. A *BoundaryError means
// the command did not run.
func (l *NestedLauncher) Run(ctx context.Context, spec LaunchSpec) (int, error) {
	defer l.release()
	cmd := l.cmd
	<-l.notified
	werr := launcher.SendSpec(l.specConn, spec, l.stdio)
	l.specConn.Close()
	status, _ := io.ReadAll(l.statusR)
	if werr != nil || len(status) > 0 {
		cmd.Wait()
		if werr != nil {
			return 0, &BoundaryError{Layer: LayerLandlock, Err: werr}
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
	return 0, fmt.Errorf("wait for nested session %s: %w", spec.SessionID, err)
}
