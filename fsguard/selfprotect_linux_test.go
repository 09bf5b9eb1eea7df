//go:build linux

package fsguard_test

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

func TestSelfProtection(t *testing.T) {
	g := loadGuard(t)
	ev := collectEvents(t, g)
	ws := realTempDir(t)
	session, bystander := testutil.NewCgroup(t), testutil.NewCgroup(t)
	if err := g.AddSession(session.ID, workspacePolicy(t, ws, nil, nil)); err != nil {
		t.Fatalf("AddSession: %v", err)
	}
	t.Cleanup(func() { g.RemoveSession(session.ID) })

	// Stands for the supervisor: a task outside the session.
	outside := exec.Command(os.Args[0])
	outside.Env = append(os.Environ(), helperEnv+"=sleep")
	if err := outside.Start(); err != nil {
		t.Fatalf("start outside task: %v", err)
	}
	t.Cleanup(func() {
		outside.Process.Kill()
		outside.Wait()
	})
	pid := strconv.Itoa(outside.Process.Pid)
	term := strconv.Itoa(int(unix.SIGTERM))

	tests := []struct {
		name   string
		op     string
		args   []string
		want   syscall.Errno
		event  fsguard.Op
		target int
	}{
		{"bpf()", "bpf", nil, unix.EPERM, fsguard.OpBPF, 0},
		{"SIGTERM to a task outside", "kill", []string{pid, term}, unix.EPERM, fsguard.OpKill, outside.Process.Pid},
		{"signal 0 to a task outside", "kill", []string{pid, "0"}, unix.EPERM, fsguard.OpKill, outside.Process.Pid},
		{"signal to itself", "kill", []string{"self", "0"}, 0, 0, 0},
		{"ptrace attach to a task outside", "ptrace", []string{pid}, unix.EPERM, fsguard.OpPtrace, outside.Process.Pid},
		{"/proc/PID/environ of a task outside", "environ", []string{pid}, unix.EACCES, fsguard.OpPtrace, outside.Process.Pid},
		{"TIOCSTI", "tiocsti", nil, unix.EPERM, fsguard.OpTIOCSTI, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inCgroup(t, &session, tt.op, tt.args...); got != tt.want {
				t.Fatalf("%s %v in session: errno %v, want %v", tt.op, tt.args, got, tt.want)
			}
			if err := outside.Process.Signal(syscall.Signal(0)); err != nil {
				t.Fatalf("the outside task is gone: %v", err)
			}
			if tt.event != 0 {
				e := ev.waitFor(t, tt.event, "")
				if e.Kind != fsguard.KindSelf || e.CgroupID != session.ID || e.Errno != unix.EPERM || int(e.TargetPID) != tt.target {
					t.Fatalf("event %+v: want kind %v, cgroup %d, EPERM, target %d", e, fsguard.KindSelf, session.ID, tt.target)
				}
			}
			// The same from outside any session works (root in the VM).
			if tt.op == "kill" && tt.args[1] != "0" {
				return
			}
			if got := inCgroup(t, &bystander, tt.op, tt.args...); got != 0 {
				t.Fatalf("%s %v outside any session: errno %v, want success", tt.op, tt.args, got)
			}
		})
	}
}
