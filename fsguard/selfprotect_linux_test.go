//go:build linux

package fsguard_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	outside := exec.Command(os.Args[0], fsArgs("sleep")...)
	if err := outside.Start(); err != nil {
		t.Fatalf("start outside task: %v", err)
	}
	t.Cleanup(func() {
		outside.Process.Kill()
		outside.Wait()
	})
	pid := strconv.Itoa(outside.Process.Pid)
	term := strconv.Itoa(int(unix.SIGTERM))

	writable, hooks, mounted := filepath.Join(ws, "w"), filepath.Join(ws, ".git/hooks"), filepath.Join(ws, "mounted")
	for _, d := range []string{writable, hooks, mounted} {
		mkdirAll(t, d)
	}
	// Mounted by the supervisor before the session, to try unmounting.
	if err := unix.Mount("tmpfs", mounted, "tmpfs", 0, ""); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", mounted, err)
	}
	t.Cleanup(func() { unix.Unmount(mounted, unix.MNT_DETACH) })

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
		{"bind mount over .git/hooks", "bind-mount", []string{writable, hooks}, unix.EPERM, fsguard.OpMount, 0},
		{"umount", "umount", []string{mounted}, unix.EPERM, fsguard.OpMount, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inCgroup(t, &session, tt.op, tt.args...); got != tt.want {
				t.Fatalf("%s %v in session: errno %v, want %v", tt.op, tt.args, got, tt.want)
			}
			if err := outside.Process.Signal(syscall.Signal(0)); err != nil {
				t.Fatalf("the outside task is gone: %v", err)
			}
			if tt.op == "bind-mount" {
				var hooksSt, writableSt unix.Stat_t
				if unix.Stat(hooks, &hooksSt) != nil || unix.Stat(writable, &writableSt) != nil || hooksSt.Ino == writableSt.Ino {
					t.Fatalf("%s now shows %s: the refused bind mount happened", hooks, writable)
				}
			}
			if tt.op == "umount" {
				var st, parent unix.Stat_t
				if unix.Stat(mounted, &st) != nil || unix.Stat(ws, &parent) != nil || st.Dev == parent.Dev {
					t.Fatalf("%s is no longer a mount point: the refused umount happened", mounted)
				}
			}
			if tt.event != 0 {
				e := ev.waitFor(t, session.ID, tt.event, "")
				if e.Kind != fsguard.KindSelf || e.CgroupID != session.ID || e.Errno != unix.EPERM || int(e.TargetPID) != tt.target {
					t.Fatalf("event %+v: want kind %v, cgroup %d, EPERM, target %d", e, fsguard.KindSelf, session.ID, tt.target)
				}
			}
			// The same from outside any session works (root in the VM).
			if tt.op == "kill" && tt.args[1] != "0" || tt.op == "bind-mount" || tt.op == "umount" {
				return
			}
			if got := inCgroup(t, &bystander, tt.op, tt.args...); got != 0 {
				t.Fatalf("%s %v outside any session: errno %v, want success", tt.op, tt.args, got)
			}
		})
	}
}

// unshare -Urm: in a new user and mount namespace the session holds
// CAP_SYS_ADMIN over its own mounts; a bind mount there is still refused,
// and the inode ancestry of a protected entry does not change anyway.
func TestUserNamespaceMountRefused(t *testing.T) {
	g := loadGuard(t)
	ev := collectEvents(t, g)
	ws := realTempDir(t)
	session, bystander := testutil.NewCgroup(t), testutil.NewCgroup(t)
	writable, hooks := filepath.Join(ws, "w"), filepath.Join(ws, ".git/hooks")
	mkdirAll(t, writable)
	mkdirAll(t, hooks)
	if err := g.AddSession(session.ID, workspacePolicy(t, ws, nil, nil)); err != nil {
		t.Fatalf("AddSession: %v", err)
	}
	t.Cleanup(func() { g.RemoveSession(session.ID) })

	run := func(cg *testutil.Cgroup) syscall.Errno {
		t.Helper()
		cmd := exec.Command(os.Args[0], fsArgs("bind-mount", writable, hooks)...)
		cmd.Stderr = os.Stderr
		fd := openCgroup(t, cg)
		defer unix.Close(fd)
		cmd.SysProcAttr = &syscall.SysProcAttr{
			UseCgroupFD: true, CgroupFD: fd,
			Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper in a new user+mount namespace: %v", err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("helper printed %q", out)
		}
		return syscall.Errno(n)
	}
	// Independent check that the namespace grants the mount at all.
	if got := run(&bystander); got != 0 {
		testutil.SkipUnlessVM(t, "bind mount in a new user+mount namespace fails outside any session: %v", got)
	}
	if got := run(&session); got != unix.EPERM {
		t.Fatalf("bind mount in a new user+mount namespace inside the session: errno %v, want EPERM", got)
	}
	e := ev.waitFor(t, session.ID, fsguard.OpMount, "")
	if e.Kind != fsguard.KindSelf || e.CgroupID != session.ID {
		t.Fatalf("event %+v: want kind %v in cgroup %d", e, fsguard.KindSelf, session.ID)
	}
}
