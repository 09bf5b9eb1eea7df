//go:build linux

package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// launcherGoneLayer is an exec-gated layer that, once applied, waits for
// the session's launcher to exit, or finds it gone: the launcher failed
// in what it does while the gate is open, and the supervisor's GateGo
// then finds the gate closed (EPIPE).
type launcherGoneLayer struct {
	applied, tornDown bool
	err               error
}

func (g *launcherGoneLayer) Name() string         { return "fake-gated-wait" }
func (g *launcherGoneLayer) activatesBeforeExec() {}

func (g *launcherGoneLayer) Apply(ctx context.Context, s SessionInfo) (func(context.Context) error, error) {
	g.applied = true
	b, err := os.ReadFile(filepath.Join(s.CgroupPath, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	pids := strings.Fields(string(b))
	if len(pids) == 0 {
		// The launcher got its spec at its start, so it can have reached
		// the gate, failed in its narrowing and exited before the
		// supervisor reads the gate's message: gone already.
		return func(context.Context) error { g.tornDown = true; return nil }, nil
	}
	if len(pids) != 1 {
		g.err = errors.New("the session group holds " + strings.Join(pids, ",") + ", want the launcher alone")
		return nil, g.err
	}
	pid, _ := strconv.Atoi(pids[0])
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		g.err = err
		return nil, err
	}
	defer unix.Close(fd)
	// A pidfd polls readable once its process has exited.
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n != 1 {
			g.err = err
			return nil, err
		}
		break
	}
	return func(context.Context) error { g.tornDown = true; return nil }, nil
}

// TestRunExecGateNarrowingFails proves that a launcher that fails in what
// it does while the gated layers are activated (here its chdir, part of
// the credentials it takes on) is reported as that failure, not as the
// closed gate the supervisor then finds: nothing ran, the gated layer is
// undone and the registry is clean.
func TestRunExecGateNarrowingFails(t *testing.T) {
	c, ws, self, reg := gateTestSession(t, "oxs-gatefail-")
	marker := filepath.Join(ws, "marker")
	gone := &launcherGoneLayer{}
	_, err := Run(context.Background(), RunOptions{
		Policy: c, Argv: []string{"touch", marker}, Env: []string{"PATH=/usr/bin:/bin"},
		Dir: filepath.Join(ws, "missing"), SelfExe: self, Registry: reg, Layers: []SessionLayer{gone},
	})
	if gone.err != nil {
		t.Fatalf("gated layer: %v", gone.err)
	}
	if !gone.applied {
		t.Fatal("the gated layer was never applied: the launcher failed before its gate")
	}
	var be *BoundaryError
	if !errors.As(err, &be) || be.Layer != "credentials" || !strings.Contains(be.Error(), "chdir") {
		t.Fatalf("Run with a launcher failing at the gate: %v, want a BoundaryError of layer credentials naming the chdir", err)
	}
	if !gone.tornDown {
		t.Error("the gated layer was not undone")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran: %v", err)
	}
	if entries, _ := os.ReadDir(reg.Dir); len(entries) != 0 {
		t.Errorf("registry entries left behind: %v", entries)
	}
}

// aheadLayer counts its attachAhead calls and their releases.
type aheadLayer struct {
	gatedLayer
	attached, released int
}

func (a *aheadLayer) attachAhead() func() {
	a.attached++
	return func() { a.released++ }
}

// TestAttachAhead proves attachAhead attaches every layer that attaches
// ahead (on its own goroutine) and that its release waits for that and
// releases each once, however often it is called.
func TestAttachAhead(t *testing.T) {
	tests := []struct {
		name     string
		layers   int
		releases int
	}{
		{"none", 0, 1},
		{"one", 1, 1},
		{"two, released twice", 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var layers []SessionLayer
			var ahead []*aheadLayer
			for i := 0; i < tt.layers; i++ {
				a := &aheadLayer{}
				ahead = append(ahead, a)
				layers = append(layers, a)
			}
			// A layer without attachAhead is left alone.
			layers = append(layers, &gatedLayer{})
			release := attachAhead(layers)
			for i := 0; i < tt.releases; i++ {
				release()
			}
			for i, a := range ahead {
				if a.attached != 1 || a.released != 1 {
					t.Errorf("layer %d: attached %d, released %d times, want 1 and 1", i, a.attached, a.released)
				}
			}
		})
	}
}

// TestStatusPipe proves the supervisor's end of the launcher's status
// pipe blocks (its read waits on its thread, not in the runtime's
// poller) and that neither end leaks into another child.
func TestStatusPipe(t *testing.T) {
	r, w, err := statusPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, f := range []*os.File{r, w} {
		fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		if err != nil {
			t.Fatal(err)
		}
		if fl&unix.O_NONBLOCK != 0 {
			t.Errorf("%s: O_NONBLOCK set", f.Name())
		}
		fd, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
		if err != nil {
			t.Fatal(err)
		}
		if fd&unix.FD_CLOEXEC == 0 {
			t.Errorf("%s: not close-on-exec", f.Name())
		}
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b := make([]byte, 4)
	if n, err := r.Read(b); n != 1 || err != nil || b[0] != 'x' {
		t.Fatalf("read %q, %v; want x", b[:n], err)
	}
	if n, err := r.Read(b); n != 0 || err == nil {
		t.Fatalf("read after the writer closed: %d, %v; want EOF", n, err)
	}
}

// earlyFailLayer is an early layer (applied while the launcher builds
// its mount namespace) that fails. With atGate it first waits until the
// launcher is at its exec gate: narrowed to its seccomp filter, the last
// step before it waits for GateGo.
type earlyFailLayer struct {
	atGate bool
	// exe is what the session's one process ran when the layer failed,
	// pidfd that process, left open for the test.
	exe   string
	pidfd int
	// group is the session's cgroup.
	group string
	err   error
}

func (e *earlyFailLayer) Name() string { return "fake-early-fail" }

func (e *earlyFailLayer) Apply(ctx context.Context, s SessionInfo) (func(context.Context) error, error) {
	e.group = s.CgroupPath
	b, err := os.ReadFile(filepath.Join(s.CgroupPath, "cgroup.procs"))
	if err != nil {
		e.err = err
		return nil, err
	}
	pids := strings.Fields(string(b))
	if len(pids) != 1 {
		e.err = errors.New("the session group holds " + strings.Join(pids, ",") + ", want the launcher alone")
		return nil, e.err
	}
	pid, _ := strconv.Atoi(pids[0])
	if e.pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
		e.err = err
		return nil, err
	}
	for e.atGate {
		st, err := os.ReadFile("/proc/" + pids[0] + "/status")
		if err != nil {
			e.err = err
			return nil, err
		}
		if strings.Contains(string(st), "\nSeccomp:\t2\n") {
			break
		}
		// Until the launcher is there, or has exited (its pidfd polls
		// readable: the launcher failed, which the test reports).
		if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(e.pidfd), Events: unix.POLLIN}}, 1); n == 1 {
			e.err = errors.New("the launcher exited before its exec gate")
			return nil, e.err
		}
	}
	e.exe, _ = os.Readlink("/proc/" + pids[0] + "/exe")
	return nil, errors.New("refused while the launcher builds its boundary")
}

// TestRunEarlyLayerFailsAtGate proves that an early layer, applied while
// the launcher already has its spec, that fails (as the launcher
// approaches its exec gate, or waits at it) stops the command from ever
// running: the launcher is killed before it execs, and the session's
// group and registry entry are gone.
func TestRunEarlyLayerFailsAtGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		atGate bool
	}{
		{"approaching the gate", false},
		{"at the gate", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ws, self, reg := gateTestSession(t, "oxs-earlyfail-")
			marker := filepath.Join(ws, "marker")
			layer := &earlyFailLayer{atGate: tc.atGate, pidfd: -1}
			onStart := false
			_, err := Run(context.Background(), RunOptions{
				Policy: c, Argv: []string{"touch", marker}, Env: []string{"PATH=/usr/bin:/bin"},
				Dir: ws, SelfExe: self, Registry: reg, Layers: []SessionLayer{layer},
				OnStart: func(SessionInfo) { onStart = true },
			})
			if layer.pidfd >= 0 {
				defer unix.Close(layer.pidfd)
			}
			if layer.err != nil {
				t.Fatalf("early layer: %v", layer.err)
			}
			var be *BoundaryError
			if !errors.As(err, &be) || be.Layer != "fake-early-fail" {
				t.Fatalf("Run with a failing early layer: %v, want a BoundaryError naming fake-early-fail", err)
			}
			if onStart {
				t.Error("OnStart was called for a session whose layers failed")
			}
			if layer.exe != self {
				t.Errorf("the session's process ran %q when the layer failed, want the launcher %q (not yet exec'd)", layer.exe, self)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the command ran although an early layer failed: %v", err)
			}
			// A pidfd polls readable once its process has exited.
			if n, _ := unix.Poll([]unix.PollFd{{Fd: int32(layer.pidfd), Events: unix.POLLIN}}, 0); n != 1 {
				t.Error("the launcher outlived Run")
			}
			if _, err := os.Stat(layer.group); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("session group %s left behind: %v", layer.group, err)
			}
			if entries, _ := os.ReadDir(reg.Dir); len(entries) != 0 {
				t.Errorf("registry entries left behind: %v", entries)
			}
		})
	}
}
