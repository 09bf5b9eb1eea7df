//go:build linux

package launcher

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// socketPair is a spec channel: the supervisor's end and the launcher's.
func socketPair(t *testing.T) (*os.File, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[1]) })
	conn := os.NewFile(uintptr(fds[0]), "spec")
	t.Cleanup(func() { conn.Close() })
	return conn, fds[1]
}

func sameFile(t *testing.T, fd int, f *os.File) bool {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(int(f.Fd()), &b); err != nil {
		t.Fatal(err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// The spec travels with the session's descriptors: the launcher reads the
// spec as sent (stamped with this SpecVersion, larger than the socket's
// buffer too) and gets stdin, stdout, stderr and, with a private
// /dev/shm, its tmpfs, in that order, close-on-exec until it installs
// them.
func TestSpecChannel(t *testing.T) {
	for _, shm := range []bool{false, true} {
		conn, launcherEnd := socketPair(t)
		var files []*os.File
		for i := 0; i < 4; i++ {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			files = append(files, r)
		}
		// Beyond the socket's buffer: the send is a sendmsg and writes.
		long := strings.Repeat("x", 4<<20)
		spec := Spec{Path: "/bin/true", Argv: []string{"true", long}, Mounts: MountPlan{PrivateShm: shm}}
		sent := make(chan error, 1)
		go func() {
			d := Descriptors{Stdin: files[0], Stdout: files[1], Stderr: files[2]}
			if shm {
				d.Shm = files[3]
			}
			sent <- SendSpec(conn, spec, d)
		}()
		got, fds, err := readSpecFrame(launcherEnd)
		if err != nil {
			t.Fatalf("shm %v: readSpecFrame: %v", shm, err)
		}
		if err := <-sent; err != nil {
			t.Fatalf("SendSpec: %v", err)
		}
		defer closeFDs(fds)
		if got.Version != SpecVersion || got.Path != "/bin/true" || len(got.Argv) != 2 || got.Argv[1] != long || got.Mounts.PrivateShm != shm {
			t.Errorf("shm %v: spec read back differs: version %d path %q argv %d", shm, got.Version, got.Path, len(got.Argv))
		}
		want := 3
		if shm {
			want = 4
		}
		if len(fds) != want {
			t.Fatalf("shm %v: %d descriptors, want %d", shm, len(fds), want)
		}
		for i, fd := range fds {
			if !sameFile(t, fd, files[i]) {
				t.Errorf("shm %v: descriptor %d is not the one sent", shm, i)
			}
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
				t.Errorf("shm %v: descriptor %d not close-on-exec (%d, %v)", shm, i, flags, err)
			}
		}
	}
}

// A frame with other descriptors than its spec asks for, or none, or one
// cut short, is refused, and what came with it is closed.
func TestSpecChannelRefuses(t *testing.T) {
	frame := func(body string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	thisVersion := strconv.Itoa(SpecVersion)
	spec := `{"version":` + thisVersion + `,"path":"/bin/true"}`
	for _, tc := range []struct {
		name    string
		frame   []byte
		fds     int
		wantErr string
	}{
		{"two descriptors", frame(spec), 2, "came with 2 descriptors, want 3"},
		{"no descriptors", frame(spec), 0, "came with 0 descriptors, want 3"},
		{"shm missing", frame(`{"version":` + thisVersion + `,"path":"/bin/true","mounts":{"private_shm":true}}`), 3, "want 4 (stdin, stdout, stderr, private /dev/shm)"},
		{"cut short", frame(spec)[:10], 3, "closed the spec channel before the spec was complete"},
		{"another version", frame(`{"version":1,"path":"/bin/true"}`), 3, "launch spec version 1"},
		{"too long", binary.BigEndian.AppendUint32(nil, maxSpecBytes+1), 3, "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, launcherEnd := socketPair(t)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			var oob []byte
			if tc.fds > 0 {
				fds := make([]int, tc.fds)
				for i := range fds {
					fds[i] = int(r.Fd())
				}
				oob = unix.UnixRights(fds...)
			}
			if err := unix.Sendmsg(int(conn.Fd()), tc.frame, oob, nil, 0); err != nil {
				t.Fatal(err)
			}
			conn.Close()
			_, fds, err := readSpecFrame(launcherEnd)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("readSpecFrame: %v, %v; want an error mentioning %q", fds, err, tc.wantErr)
			}
			// Every received copy of r is closed: w's write end sees
			// only r itself as a reader.
			r.Close()
			if _, err := w.Write([]byte("x")); err == nil {
				t.Errorf("a descriptor that came with the refused frame is still open")
			}
		})
	}
}
