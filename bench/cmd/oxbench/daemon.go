//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/daemon"
	"github.com/openoxide/oxsupervise/internal/companion"
)

// benchDaemon is an `oxsupervise daemon` private to one suite: its own
// socket, cgroup parent, run directory and audit log, so it neither sees
// nor disturbs a system daemon or other sessions on the machine.
type benchDaemon struct {
	dir       string // public (0755) directory: binary, socket, workspace
	oxs       string // copy of the oxsupervise binary every user can execute
	socket    string
	parent    string // cgroup parent, relative to the cgroup2 mount
	workspace string // root-owned 0755: the client (nobody) cannot write it
	log       string // daemon's stderr
	cred      *syscall.Credential
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the daemon process is reaped
	logFile   *os.File
}

// startDaemon starts the daemon and waits until its socket answers.
func (e *env) startDaemon(ctx context.Context) (*benchDaemon, error) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("look up user nobody (the daemon's client runs as it): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user nobody: %w", err)
	}
	// The scratch directory is 0700; the client and the sessions it asks
	// for run as nobody, so they get a directory of their own that
	// everyone can traverse (and nobody but root can write).
	dir, err := os.MkdirTemp("", "oxbench-daemon-")
	if err != nil {
		return nil, err
	}
	d := &benchDaemon{
		dir: dir, oxs: filepath.Join(dir, "oxsupervise"), socket: filepath.Join(dir, "api.sock"),
		parent:    fmt.Sprintf("oxbench-daemon-%d", os.Getpid()),
		workspace: filepath.Join(dir, "ws"), log: filepath.Join(dir, "daemon.log"),
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
	}
	fail := func(err error) (*benchDaemon, error) {
		d.stop()
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	if err := os.Mkdir(d.workspace, 0o755); err != nil {
		return fail(err)
	}
	if err := copyFile(e.oxs, d.oxs, 0o755); err != nil {
		return fail(fmt.Errorf("copy oxsupervise where nobody can execute it: %w", err))
	}
	// The programs it executes go with it (`oxsupervise daemon` is the
	// daemon program); one not built is not there for the copy either.
	for _, name := range companion.Names() {
		p, err := companion.FindIn(name, companion.Dirs(e.oxs), os.Geteuid())
		if errors.Is(err, companion.ErrNotFound) {
			continue
		}
		if err != nil {
			return fail(err)
		}
		p.Close()
		if err := copyFile(p.Path, filepath.Join(dir, name), 0o755); err != nil {
			return fail(fmt.Errorf("copy %s beside oxsupervise: %w", name, err))
		}
	}
	if d.logFile, err = os.Create(d.log); err != nil {
		return fail(err)
	}
	d.cmd = exec.Command(d.oxs, "daemon", "--socket", d.socket, "--cgroup-parent", d.parent,
		"--run-dir", filepath.Join(dir, "run"), "--audit-log", filepath.Join(dir, "audit.jsonl"))
	d.cmd.Stdout, d.cmd.Stderr = d.logFile, d.logFile
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		return fail(fmt.Errorf("start daemon: %w", err))
	}
	d.exited = make(chan struct{})
	var waitErr error
	go func() { waitErr = d.cmd.Wait(); close(d.exited) }()
	// It builds the network layer (loads and verifies the BPF programs)
	// before it listens, which takes seconds on a loaded host.
	deadline := time.Now().Add(90 * time.Second)
	for !daemon.Available(d.socket) {
		select {
		case <-d.exited:
			return fail(fmt.Errorf("daemon exited before answering: %v: %s", waitErr, lastLines(readString(d.log), 4)))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("daemon did not answer on %s within 90 s: %s", d.socket, lastLines(readString(d.log), 4)))
		}
	}
	return d, nil
}

// pid of the daemon process.
func (d *benchDaemon) pid() int { return d.cmd.Process.Pid }

// client returns a command that runs `oxsupervise run` through the daemon
// as nobody, in the workspace, with the daemon's socket in its
// environment (a non-root `run` uses the daemon when its socket answers).
func (d *benchDaemon) client(ctx context.Context, runFlags []string, argv ...string) *exec.Cmd {
	return d.clientAs(ctx, d.cred, runFlags, argv...)
}

// clientAs is client with the client running as cred.
func (d *benchDaemon) clientAs(ctx context.Context, cred *syscall.Credential, runFlags []string, argv ...string) *exec.Cmd {
	args := append(append([]string{"run", "--workspace", d.workspace}, runFlags...), "--")
	cmd := exec.CommandContext(ctx, d.oxs, append(args, argv...)...)
	cmd.Dir = d.workspace
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "OXSUPERVISE_SOCKET=" + d.socket}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// runTimed runs one client (`run RUNFLAGS -- ARGV`) to completion and
// returns its wall time.
func (d *benchDaemon) runTimed(ctx context.Context, runFlags []string, argv ...string) (time.Duration, error) {
	cmd := d.client(ctx, runFlags, argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	dur := time.Since(start)
	if err != nil {
		return dur, fmt.Errorf("oxsupervise run (as nobody, through the daemon) -- %s: %w: %s", strings.Join(argv, " "), err, lastLines(stderr.String(), 4))
	}
	return dur, nil
}

// sessions counts the daemon's sessions that have processes.
func (d *benchDaemon) sessions(ctx context.Context) (int, error) {
	list, err := (&daemon.Client{Socket: d.socket}).Sessions(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list {
		if s.State == "running" {
			n++
		}
	}
	return n, nil
}

// stop ends the daemon (SIGTERM: it stops its sessions and detaches its
// programs), removes its cgroup parent and its directory.
func (d *benchDaemon) stop() {
	if d.exited != nil {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(15 * time.Second):
			fmt.Fprintln(os.Stderr, "oxbench: daemon did not stop within 15 s of SIGTERM; killing it")
			d.cmd.Process.Kill()
			<-d.exited
		}
	}
	if d.logFile != nil {
		d.logFile.Close()
	}
	if mount, err := cgroup.Cgroup2Mount(); err == nil {
		if err := unix.Rmdir(filepath.Join(mount, d.parent)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "oxbench: remove cgroup %s: %v\n", d.parent, err)
		}
	}
	os.RemoveAll(d.dir)
}

// withoutWarnings drops the clients' "warning:" lines, which every client
// prints and which would hide the one error that matters.
func withoutWarnings(log string) string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "warning:") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// daemonMemory measures the daemon's RSS idle and with n concurrent
// sessions, each a client (an unprivileged user) running `sleep` through it.
func (e *env) daemonMemory(ctx context.Context, n int) ([][]string, error) {
	d, err := e.startDaemon(ctx)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	time.Sleep(2 * time.Second)
	idle, idleHWM, err := procRSS(d.pid())
	if err != nil {
		return nil, fmt.Errorf("daemon RSS: %w", err)
	}
	rows := [][]string{{"daemon RSS, idle", fmt.Sprintf("%.1f MiB (peak so far %.1f MiB)", idle, idleHWM),
		"VmRSS/VmHWM of `oxsupervise daemon` 2 s after its socket answered (network programs loaded, no session yet)"}}

	clientLog, err := os.Create(filepath.Join(d.dir, "clients.log"))
	if err != nil {
		return rows, err
	}
	defer clientLog.Close()
	// The daemon admits at most DefaultMaxConnsPerUID connections per uid
	// and a client holds one while its session runs, so more sessions
	// than that come from a second unprivileged user.
	creds := []*syscall.Credential{d.cred}
	users := "nobody"
	if n > daemon.DefaultMaxConnsPerUID {
		u, err := user.Lookup("daemon")
		if err != nil {
			return rows, fmt.Errorf("%d sessions need a second client user beside nobody (the daemon admits %d connections per uid): look up user daemon: %w", n, daemon.DefaultMaxConnsPerUID, err)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return rows, fmt.Errorf("user daemon: %w", err)
		}
		creds = append(creds, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)})
		users = fmt.Sprintf("nobody and daemon, alternating (the daemon admits %d connections per uid, daemon.DefaultMaxConnsPerUID)", daemon.DefaultMaxConnsPerUID)
	}
	var clients []*exec.Cmd
	exited := make(chan int, n)
	defer func() {
		for _, c := range clients {
			c.Process.Kill()
		}
		for range clients {
			<-exited
		}
	}()
	// Clients start in batches of clientBatch, each batch once the one
	// before has its sessions running: a client whose /health probe of
	// the daemon times out (2 s, daemon.Available) while the daemon is
	// busy building dozens of sessions falls back to a standalone run,
	// which a non-root user cannot do.
	const clientBatch = 10
	start := time.Now()
	running := 0
	waitRunning := func(target int) error {
		for {
			var err error
			running, err = d.sessions(ctx)
			if err != nil {
				return fmt.Errorf("list daemon sessions: %w", err)
			}
			if running >= target {
				return nil
			}
			select {
			case pid := <-exited:
				exited <- pid // the deferred cleanup counts it
				return fmt.Errorf("a client (pid %d) exited with %d of %d sessions running: %s", pid, running, target, lastLines(withoutWarnings(readString(clientLog.Name())), 4))
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
			if time.Since(start) > 3*time.Minute {
				return fmt.Errorf("only %d of %d sessions running after 3 min", running, target)
			}
		}
	}
	for i := 0; i < n; i++ {
		// Longer than the measurement can take; the clients are killed
		// once it is done, and the daemon stops a session whose client
		// went away.
		c := d.clientAs(ctx, creds[i%len(creds)], nil, "sleep", "3600")
		c.Stdout, c.Stderr = clientLog, clientLog
		if err := c.Start(); err != nil {
			return rows, fmt.Errorf("start client %d: %w", i, err)
		}
		clients = append(clients, c)
		go func() { c.Wait(); exited <- c.Process.Pid }()
		if (i+1)%clientBatch == 0 || i == n-1 {
			if err := waitRunning(i + 1); err != nil {
				return rows, err
			}
		}
	}
	ramp := time.Since(start)
	time.Sleep(2 * time.Second)
	full, fullHWM, err := procRSS(d.pid())
	if err != nil {
		return rows, fmt.Errorf("daemon RSS: %w", err)
	}
	var clientRSS, sessionRSS float64
	for _, c := range clients {
		rss, _, err := procRSS(c.Process.Pid)
		if err != nil {
			return rows, fmt.Errorf("client RSS: %w", err)
		}
		clientRSS += rss
	}
	list, err := (&daemon.Client{Socket: d.socket}).Sessions(ctx)
	if err != nil {
		return rows, err
	}
	procs := 0
	for _, s := range list {
		for _, pid := range s.Procs {
			if rss, _, err := procRSS(pid); err == nil {
				sessionRSS += rss
				procs++
			}
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.pid()))
	rows = append(rows,
		[]string{fmt.Sprintf("daemon RSS, %d concurrent sessions", n), fmt.Sprintf("%.1f MiB (peak %.1f MiB); %d open fds", full, fullHWM, len(fds)),
			fmt.Sprintf("%d clients started in batches of %d (the next batch once the last one's sessions ran) as %s, each `oxsupervise run --workspace WS -- sleep 3600` through the daemon (default policy: workspace-write, network layer); all %d sessions running after %.1f s; VmRSS 2 s later", n, clientBatch, users, n, ramp.Seconds())},
		[]string{"daemon RSS per session", fmt.Sprintf("%.1f KiB", (full-idle)*1024/float64(n)), fmt.Sprintf("(RSS with %d − idle) / %d", n, n)},
		[]string{"processes inside the session groups, per session", fmt.Sprintf("%.1f MiB (%d processes in %d sessions)", sessionRSS/float64(n), procs, n), "sum of VmRSS of every pid the daemon lists in its sessions (GET /sessions), / sessions; shared pages counted in each process"},
		[]string{"client (`oxsupervise run` as an unprivileged user), per session", fmt.Sprintf("%.1f MiB", clientRSS/float64(n)), "mean VmRSS of the client processes, which wait for the session's exit status"},
	)
	for _, c := range clients {
		c.Process.Kill()
	}
	stopStart := time.Now()
	for running > 0 && time.Since(stopStart) < time.Minute {
		time.Sleep(250 * time.Millisecond)
		if running, err = d.sessions(ctx); err != nil {
			return rows, fmt.Errorf("list daemon sessions: %w", err)
		}
	}
	if running > 0 {
		return rows, fmt.Errorf("%d sessions still running 1 min after their clients were killed", running)
	}
	stopTook := time.Since(stopStart)
	time.Sleep(2 * time.Second)
	after, _, err := procRSS(d.pid())
	if err != nil {
		return rows, fmt.Errorf("daemon RSS: %w", err)
	}
	rows = append(rows, []string{"daemon RSS after the sessions ended", fmt.Sprintf("%.1f MiB", after),
		fmt.Sprintf("clients killed (SIGKILL); the daemon stopped all %d sessions within %.1f s; VmRSS 2 s later (the Go runtime returns freed memory to the kernel lazily)", n, stopTook.Seconds())})
	return rows, nil
}
