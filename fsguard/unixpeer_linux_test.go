//go:build linux

package fsguard_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// unixPeerOp is the helper "unixpeer NAME TYPE": it binds an AF_UNIX
// socket of TYPE (stream: listening, or dgram) at the abstract NAME in
// its own cgroup and sends it back over fd 3, so the test holds a socket
// whose creator's cgroup is the one the helper ran in.
func unixPeerOp(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: unixpeer NAME stream|dgram")
		return 2
	}
	typ := unix.SOCK_DGRAM
	if args[1] == "stream" {
		typ = unix.SOCK_STREAM
	}
	fd, err := unix.Socket(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrUnix{Name: args[0]})
	}
	if err == nil && typ == unix.SOCK_STREAM {
		err = unix.Listen(fd, 8)
	}
	if err == nil {
		err = unix.Sendmsg(3, []byte{0}, unix.UnixRights(fd), nil, 0)
	}
	return testutil.ReportErrno(err)
}

// peerIn makes the test hold a socket bound at the abstract name that a
// process in cg created (nil: in the test's own cgroup), until it ends.
func peerIn(t *testing.T, cg *testutil.Cgroup, name, typ string) {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "ours"), os.NewFile(uintptr(pair[1]), "theirs")
	defer ours.Close()
	defer theirs.Close()
	cmd := exec.Command(os.Args[0], testutil.OpArgs("unixpeer", name, typ)...)
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = os.Stderr
	if cg != nil {
		fd := openCgroup(t, cg)
		defer unix.Close(fd)
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	if out, err := cmd.Output(); err != nil || string(out) != "0\n" {
		t.Fatalf("helper binding %s %s: %q, %v", typ, name, out, err)
	}
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(ours.Fd()), buf, oob, 0)
	if err != nil {
		t.Fatalf("receive the %s socket: %v", name, err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive the %s socket: %d messages, %v", name, len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("receive the %s socket: %v (%d fds)", name, err, len(fds))
	}
	t.Cleanup(func() { unix.Close(fds[0]) })
}

// nestedCgroup is a cgroup below parent, as a nested session's is below
// its parent session's.
func nestedCgroup(t *testing.T, parent testutil.Cgroup) testutil.Cgroup {
	t.Helper()
	dir := filepath.Join(parent.Dir, "nested")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create nested cgroup: %v", err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	return testutil.Cgroup{Dir: dir, ID: st.Ino}
}

// TestAbstractUnixPeers: an abstract AF_UNIX socket is reached by a
// session only when a task of that session, or of a session nested below
// it, created it, for stream connects and datagram sends alike; a nested
// session does not reach its parent's (Landlock's scoping). The refusal is
// EPERM with a KindUnixPeer event naming the socket.
func TestAbstractUnixPeers(t *testing.T) {
	g := loadGuard(t)
	ev := collectEvents(t, g)
	ws := realTempDir(t)
	parent := testutil.NewCgroup(t)
	child := nestedCgroup(t, parent)
	for _, cg := range []testutil.Cgroup{parent, child} {
		if err := g.AddSession(cg.ID, workspacePolicy(t, ws, nil, nil)); err != nil {
			t.Fatalf("AddSession %s: %v", cg.Dir, err)
		}
		t.Cleanup(func() { g.RemoveSession(cg.ID) })
	}
	owners := map[string]*testutil.Cgroup{"parent": &parent, "child": &child, "outside": nil}
	name := func(owner, typ string) string {
		return "@oxs-peer-" + strconv.Itoa(os.Getpid()) + "/" + owner + "/" + typ
	}
	for owner, cg := range owners {
		for _, typ := range []string{"stream", "dgram"} {
			peerIn(t, cg, name(owner, typ), typ)
		}
	}
	tests := []struct {
		from string
		cg   *testutil.Cgroup // from's
		to   string
		want syscall.Errno
	}{
		{"parent", &parent, "parent", 0},
		{"parent", &parent, "child", 0},
		{"child", &child, "child", 0},
		{"child", &child, "parent", unix.EPERM},
		{"child", &child, "outside", unix.EPERM},
		{"parent", &parent, "outside", unix.EPERM},
		{"no session", nil, "parent", 0},
	}
	for _, tt := range tests {
		for typ, op := range map[string]string{"stream": "unix-connect", "dgram": "unix-sendto"} {
			t.Run(fmt.Sprintf("%s to %s %s", tt.from, tt.to, typ), func(t *testing.T) {
				peer := name(tt.to, typ)
				if got := inCgroup(t, tt.cg, op, peer); got != tt.want {
					t.Fatalf("%s %s from %s: errno %v, want %v", op, peer, tt.from, got, tt.want)
				}
				if tt.want == 0 {
					return
				}
				e := ev.waitFor(t, tt.cg.ID, fsguard.OpUnixConnect, peer)
				if e.Kind != fsguard.KindUnixPeer || e.Errno != tt.want || e.Ino != 0 || e.Dev != 0 {
					t.Fatalf("event %+v: want kind %v errno %v, no inode", e, fsguard.KindUnixPeer, tt.want)
				}
			})
		}
	}
}
