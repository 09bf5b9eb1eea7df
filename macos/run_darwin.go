//go:build darwin

package macos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/policy"
)

// logReadyTimeout bounds the wait for `log stream` to report that it is
// filtering; denials before that point would be lost, so Run refuses to
// start the command without it.
const logReadyTimeout = 10 * time.Second

// logDrain is how long denials may trail the command's exit in the log.
const logDrain = 1500 * time.Millisecond

// Run runs argv under the Seatbelt profile generated from c and returns
// the command's exit status. An error means the boundary could not be
// built and the command did not run (exit code -1), or that waiting for it
// failed.
func Run(ctx context.Context, c *policy.Compiled, argv []string, cfg RunConfig) (int, error) {
	if len(argv) == 0 {
		return -1, errors.New("seatbelt run: no command")
	}
	prof, err := Generate(c, cfg.Options)
	if err != nil {
		return -1, err
	}
	stderr := cfg.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	for _, w := range prof.Warnings {
		fmt.Fprintf(stderr, "oxsupervise: WARNING: %s\n", w)
	}
	var cmd *exec.Cmd
	if prof.Unsandboxed {
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	} else {
		if _, err := os.Stat(SandboxExecPath); err != nil {
			return -1, fmt.Errorf("seatbelt run: %s is unavailable, refusing to run unconfined: %w", SandboxExecPath, err)
		}
		cmd = exec.CommandContext(ctx, SandboxExecPath, prof.SandboxExecArgs(argv)...)
	}
	cmd.Env, cmd.Dir = cfg.Env, cfg.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = cfg.Stdin, cfg.Stdout, stderr

	var stream *logStream
	if cfg.Audit != nil && !prof.Unsandboxed {
		stream, err = startLogStream(ctx)
		if err != nil {
			return -1, err
		}
		defer stream.stop()
	}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("seatbelt run: start %s: %w", argv[0], err)
	}
	var wg sync.WaitGroup
	if stream != nil {
		// sandbox-exec execs the command in place, so its pid is the
		// root of the session's process tree.
		tree := NewTree(cmd.Process.Pid, processTable)
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream.forward(tree, c, cfg, prof, stderr)
		}()
	}
	waitErr := cmd.Wait()
	if stream != nil {
		time.Sleep(logDrain)
		stream.stop()
		wg.Wait()
	}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
		return 0, nil
	case errors.As(waitErr, &exitErr):
		if ws, ok := exitErr.Sys().(unix.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exitErr.ExitCode(), nil
	default:
		return -1, fmt.Errorf("seatbelt run: wait for %s: %w", argv[0], waitErr)
	}
}

type logStream struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
	once  sync.Once
}

func startLogStream(ctx context.Context) (*logStream, error) {
	cmd := exec.CommandContext(ctx, LogPath, LogStreamArgs()...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("seatbelt audit: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("seatbelt audit: start %s: %w", LogPath, err)
	}
	s := &logStream{cmd: cmd, lines: bufio.NewScanner(out)}
	s.lines.Buffer(make([]byte, 64<<10), 1<<20)
	// The stream is live once it delivers a line: log(1)'s "Filtering the
	// log data" banner if it prints one in this style, or else the denial
	// of a probe that the kernel logs through the same predicate. Only
	// then are the command's denials guaranteed to reach us.
	ready := make(chan bool, 1)
	go func() { ready <- s.lines.Scan() }()
	probe := time.NewTicker(500 * time.Millisecond)
	defer probe.Stop()
	deadline := time.After(logReadyTimeout)
	for {
		select {
		case ok := <-ready:
			if !ok {
				s.stop()
				return nil, fmt.Errorf("seatbelt audit: %s stream ended before it was ready: %v", LogPath, s.lines.Err())
			}
			return s, nil
		case <-probe.C:
			provokeDenial(ctx)
		case <-deadline:
			s.stop()
			return nil, fmt.Errorf("seatbelt audit: %s stream not ready after %s; refusing to run without audit", LogPath, logReadyTimeout)
		}
	}
}

// provokeDenial runs a profile that denies exec, so the kernel logs one
// Sandbox denial. Its tag names no session and its pid is in no session's
// tree, so the forwarder drops it.
func provokeDenial(ctx context.Context) {
	probe := exec.CommandContext(ctx, SandboxExecPath, "-p", `(version 1) (deny default (with message "oxs probe"))`, "--", "/usr/bin/true")
	_ = probe.Run()
}

func (s *logStream) stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
}

func (s *logStream) forward(tree *Tree, c *policy.Compiled, cfg RunConfig, prof *Profile, stderr io.Writer) {
	for s.lines.Scan() {
		d, ok, err := ParseLogLine(s.lines.Bytes())
		if err != nil {
			fmt.Fprintf(stderr, "oxsupervise: seatbelt audit: %v\n", err)
			continue
		}
		if !ok {
			continue
		}
		mine, err := tree.Belongs(d, cfg.SessionID)
		if err != nil {
			fmt.Fprintf(stderr, "oxsupervise: seatbelt audit: %v\n", err)
			continue
		}
		if !mine {
			continue
		}
		if err := cfg.Audit(d.Record(cfg.SessionID, string(c.Mode), prof.Rules)); err != nil {
			fmt.Fprintf(stderr, "oxsupervise: seatbelt audit: write record: %v\n", err)
		}
	}
}

// processTable reads every process's parent from kern.proc.all.
func processTable() (map[int]int, error) {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("sysctl kern.proc.all: %w", err)
	}
	parents := make(map[int]int, len(procs))
	for _, p := range procs {
		parents[int(p.Proc.P_pid)] = int(p.Eproc.Ppid)
	}
	return parents, nil
}
