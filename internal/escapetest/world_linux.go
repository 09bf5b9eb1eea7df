//go:build linux

package escapetest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

// World is one run's scratch world, made before the session: a git
// workspace, a home with the user's own Go build cache, a directory
// outside every writable root with a victim file and a listening unix
// socket (not one of the well-known ones run hides), an abstract socket
// the test itself listens on, a file of the host's /dev/shm, and a file
// in /etc. It lives on a tmpfs below /var/tmp (not below /tmp, a default
// writable root; not on the VM's overlayfs, where BPF-LSM refuses
// anchors).
type World struct {
	Base, WS, Home, Outside, Quarantine, AuditLog string
	// Victim is a file outside the writable roots; Etc one in /etc.
	Victim, Etc string
	// UserCache is the user's own Go build cache (~/.cache/go-build).
	UserCache string
	// PathSocket and AbstractSocket are listened on by the test, outside
	// the session ("@name" is abstract).
	PathSocket, AbstractSocket string
	// ShmHost is a file in the host's /dev/shm, ShmSession the name the
	// session creates there; both "" where there is no /dev/shm.
	ShmHost, ShmSession string
	// Cgroup2 is the cgroup2 mount point (from mountinfo); CloneMarker is
	// on the command line of any child the clone3 row's op starts.
	Cgroup2, CloneMarker string

	before map[string]unix.Stat_t
}

func newWorld(t *testing.T) *World {
	t.Helper()
	base := testutil.TmpfsBase(t, "oxs-escape-")
	w := &World{Base: base, WS: filepath.Join(base, "ws"), Home: filepath.Join(base, "home"),
		Outside: filepath.Join(base, "outside"), Quarantine: filepath.Join(base, "quarantine"),
		AuditLog: filepath.Join(base, "audit.jsonl"), before: map[string]unix.Stat_t{}}
	w.Victim = filepath.Join(w.Outside, "victim.txt")
	cg2, err := testutil.Cgroup2Root()
	if err != nil {
		t.Fatal(err)
	}
	w.Cgroup2, w.CloneMarker = cg2, "oxs-escape-clone3-session-"+filepath.Base(base)
	w.UserCache = filepath.Join(w.Home, ".cache", "go-build")
	for _, d := range []string{w.WS, w.Outside, w.UserCache, filepath.Join(w.WS, "sub"), filepath.Join(w.WS, "deep")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, w.Victim, "victim\n")
	write(t, filepath.Join(w.UserCache, "README"), "the user's own cache\n")
	write(t, filepath.Join(w.WS, "own.txt"), "own\n")
	write(t, filepath.Join(w.WS, "own-caps.txt"), "own\n")
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "test@example.invalid"}, {"config", "user.name", "oxsupervise test"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = w.WS
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + w.Home, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	for _, p := range []string{"/etc/hostname", "/etc/passwd"} {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			w.Etc = p
			break
		}
	}
	if w.Etc == "" {
		t.Fatal("no regular file /etc/hostname or /etc/passwd to try metadata changes on")
	}
	for _, p := range []string{w.Victim, w.Etc} {
		w.snapshot(t, p)
	}
	// A change that got through must not outlive the test (the row has
	// failed already).
	t.Cleanup(func() { w.restore(w.Etc) })

	w.PathSocket = filepath.Join(w.Outside, "agent.sock")
	w.AbstractSocket = "@oxs-escape-" + filepath.Base(base)
	for _, name := range []string{w.PathSocket, w.AbstractSocket} {
		ln, err := net.Listen("unix", name)
		if err != nil {
			t.Fatalf("listen on %s: %v", name, err)
		}
		t.Cleanup(func() { ln.Close() })
	}

	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		w.ShmHost = filepath.Join("/dev/shm", "oxs-escape-host-"+filepath.Base(base))
		w.ShmSession = filepath.Join("/dev/shm", "oxs-escape-session-"+filepath.Base(base))
		write(t, w.ShmHost, "host secret\n")
		t.Cleanup(func() { os.Remove(w.ShmHost); os.Remove(w.ShmSession) })
	}
	return w
}

func (w *World) snapshot(t *testing.T, p string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	w.before[p] = st
}

func (w *World) restore(p string) {
	st, ok := w.before[p]
	if !ok {
		return
	}
	unix.Chmod(p, st.Mode&0o7777)
	unix.Chown(p, int(st.Uid), int(st.Gid))
	unix.UtimesNano(p, []unix.Timespec{st.Atim, st.Mtim})
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
