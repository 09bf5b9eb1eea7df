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

// A file opened for writing outside the session and passed in over
// SCM_RIGHTS must not become a way to write outside the writable roots.
func TestReceivedWritableFD(t *testing.T) {
	g := loadGuard(t)
	ev := collectEvents(t, g)
	ws, out := realTempDir(t), realTempDir(t)
	session := testutil.NewCgroup(t)
	writeFile(t, filepath.Join(ws, "f"), "orig")
	writeFile(t, filepath.Join(out, "f"), "orig")
	if err := g.AddSession(session.ID, workspacePolicy(t, ws, nil, nil)); err != nil {
		t.Fatalf("AddSession: %v", err)
	}
	t.Cleanup(func() { g.RemoveSession(session.ID) })

	tests := []struct {
		path string
		want int // errno, or notDelivered
		data string
	}{
		{filepath.Join(out, "f"), notDelivered, "orig"},
		{filepath.Join(ws, "f"), 0, "passed"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			ours, theirs := os.NewFile(uintptr(pair[0]), "ours"), os.NewFile(uintptr(pair[1]), "theirs")
			defer ours.Close()
			defer theirs.Close()
			f, err := os.OpenFile(tt.path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := unix.Sendmsg(int(ours.Fd()), []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
				t.Fatalf("sendmsg: %v", err)
			}
			cmd := exec.Command(os.Args[0], fsArgs("recvfd-write", "passed")...)
			cmd.ExtraFiles = []*os.File{theirs}
			cmd.Stderr = os.Stderr
			fd := openCgroup(t, &session)
			defer unix.Close(fd)
			cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
			outb, err := cmd.Output()
			if err != nil {
				t.Fatalf("helper: %v", err)
			}
			got, err := strconv.Atoi(strings.TrimSpace(string(outb)))
			if err != nil || got != tt.want {
				t.Fatalf("receive and write %s in session: helper says %q, want %d", tt.path, outb, tt.want)
			}
			checkContent(t, tt.path, tt.data)
			if tt.want != 0 {
				e := ev.waitFor(t, session.ID, fsguard.OpReceive, tt.path)
				if e.Kind != fsguard.KindOutside || e.CgroupID != session.ID {
					t.Fatalf("event %+v: want kind %v in cgroup %d", e, fsguard.KindOutside, session.ID)
				}
			}
		})
	}
}
