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
)

// Exec gate messages on the launcher's gate socket.
const (
	gateMountsDone = 'm' // launcher: mount namespace built, nothing else done
	gateGo         = 'g' // supervisor: gated layers active, go on to exec
)

// launched is a launcher started in a session's group that has not been
// given its LaunchSpec yet: it waits for it on its spec pipe, and so can
// run nothing, while the supervisor finishes the session's set-up (the
// registry entry, the audit sink, the layers applied before exec). The
// start of the launcher process (exec of this binary, Go's start-up) thus
// overlaps that work instead of following it.
type launched struct {
	cmd        *exec.Cmd
	specW      *os.File // the spec pipe: EOF without a spec fails the launcher
	statusR    *os.File // EOF: the command was executed
	gateParent *os.File // the exec gate, nil without one
	files      []*os.File
	sigs       chan os.Signal
	// shmFD is the launcher's fd of the private /dev/shm, 0 without one.
	shmFD int
}

// startLauncher starts the launcher in group, in a new mount namespace
// (and network namespace with netns), with an exec gate when execGate is
// set, and shm (the session's own /dev/shm, landlock.NewPrivateShm) as
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
		extra = append(extra, gateChild) // gateFD
	}
	if shm != nil {
		l.shmFD = 3 + len(extra)
		extra = append(extra, shm)
	}

	self := opts.SelfExe
	if self == "" {
		self = "/proc/self/exe"
	}
	cloneflags := uintptr(syscall.CLONE_NEWNS)
	if netns {
		cloneflags |= syscall.CLONE_NEWNET
	}
	cmd := &exec.Cmd{
		Path:       self,
		Args:       []string{"oxsupervise", LauncherVerb},
		Env:        []string{},
		Stdin:      opts.Stdin,
		Stdout:     opts.Stdout,
		Stderr:     opts.Stderr,
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			UseCgroupFD: true,
			CgroupFD:    int(cgFD.Fd()),
			Cloneflags:  cloneflags,
			Pdeathsig:   syscall.SIGKILL,
		},
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
		extra[gateFD-3].Close()
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
// succeeded, so nothing of the command runs without them.
func (l *launched) run(ctx context.Context, opts RunOptions, spec LaunchSpec, entry *Entry, aud *auditor, activate func() error) (int, error) {
	defer l.release()
	tm := opts.Timing
	cmd := l.cmd
	b, _ := json.Marshal(spec)
	_, werr := l.specW.Write(b)
	l.specW.Close()
	if l.gateParent != nil && werr == nil {
		var msg [1]byte
		// EOF: the launcher failed before its mounts were done; its
		// status says why.
		if n, _ := l.gateParent.Read(msg[:]); n == 1 && msg[0] == gateMountsDone {
			tm.Mark("launcher at the exec gate")
			if err := activate(); err != nil {
				// The launcher has not exec'd: nothing of the command ran.
				cmd.Process.Kill()
				cmd.Wait()
				return 0, err
			}
			if _, err := l.gateParent.Write([]byte{gateGo}); err != nil {
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
		var f launchFailure
		if werr != nil {
			return 0, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("send launch spec: %w", werr)}
		}
		if err := json.Unmarshal(status, &f); err != nil {
			return 0, &BoundaryError{Layer: LayerMountNS, Err: fmt.Errorf("launcher: %s", status)}
		}
		if f.Exec != 0 {
			return f.Exec, &ExecError{f.Exec, errors.New(f.Error)}
		}
		return 0, &BoundaryError{Layer: f.Layer, Err: errors.New(f.Error)}
	}
	entry.PID = cmd.Process.Pid
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
