//go:build linux

package loader

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/testutil"
)

func TestVerifierBudgetROView(t *testing.T) {
	testutil.RequireRoot(t)
	spec, err := loadRoview()
	if err != nil {
		t.Fatal(err)
	}
	checkBudget(t, loadWithStats(t, spec, nil))
}

// TestROViewReportsEROFS: a shell in a test cgroup, in a mount namespace
// of its own with a read-only bind mount, fails a chmod (absolute path), a
// create (relative to its working directory) and an fchmod-like touch -d
// with EROFS; each is one event naming the file. A process outside the
// cgroup failing the same way is not reported, nor is the question
// access(W_OK) answered with EROFS (test -w).
func TestROViewReportsEROFS(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tool := range []string{"unshare", "mount", "sh", "chmod", "touch"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED, NOT PASSED: %s not installed", tool)
		}
	}
	cg := testutil.NewCgroup(t)
	events, err := NewEventMaps(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	var objs ROViewObjects
	if err := LoadROView(&objs, events); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	l, err := AttachROView(&objs)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := objs.RoviewSessions.Put(cg.ID, uint32(0)); err != nil {
		t.Fatal(err)
	}
	rd, err := ringbuf.NewReader(events.Ring)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()

	dir := t.TempDir()
	sub := filepath.Join(dir, "ro")
	os.Mkdir(sub, 0o755)
	victim := filepath.Join(sub, "victim")
	os.WriteFile(victim, []byte("x"), 0o644)
	script := `mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && cd "$1" || exit 9
chmod 777 "$1/victim" 2>/dev/null && exit 10
(: > new) 2>/dev/null && exit 11
touch -d 2001-01-01 victim 2>/dev/null && exit 12
[ -w victim ] && exit 13
exit 0`
	// Outside the cgroup first: nothing may be reported for it.
	if out, err := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", sub).CombinedOutput(); err != nil {
		t.Fatalf("outside the session: %v: %s", err, out)
	}
	inside := `echo $$ > "$2/cgroup.procs" && exec unshare -m --propagation private sh -c '` + script + `' sh "$1"`
	if out, err := exec.Command("sh", "-c", inside, "sh", sub, cg.Dir).CombinedOutput(); err != nil {
		t.Fatalf("inside the session: %v: %s", err, out)
	}
	var st unix.Stat_t
	if err := unix.Stat(victim, &st); err != nil || st.Mode&0o777 != 0o644 {
		t.Errorf("victim mode %o (%v), want 644", st.Mode&0o777, err)
	}
	if _, err := os.Lstat(filepath.Join(sub, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("new was created (%v)", err)
	}

	want := []struct {
		op   ROViewOp
		path string
	}{
		{ROViewOpChmod, victim},
		{ROViewOpOpen, filepath.Join(sub, "new")},
		// touch opens with O_CREAT first, then sets the times: two refusals.
		{ROViewOpOpen, victim},
		{ROViewOpUtimes, victim},
	}
	var got []*ROViewEvent
	rd.SetDeadline(time.Now().Add(2 * time.Second))
	for {
		rec, err := rd.Read()
		if err != nil {
			break
		}
		e, err := DecodeROView(rec.RawSample)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
		rd.SetDeadline(time.Now().Add(200 * time.Millisecond))
	}
	for _, e := range got {
		t.Logf("event: cgroup %d pid %d comm %q nr %d op %s paths %+v args %q", e.Hdr.CgroupId, e.Pid, e.CommName(), e.Nr, ROViewOp(e.Op), e.Paths(), e.CommandLine())
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i, w := range want {
		e := got[i]
		if e.Hdr.Source != uint32(SourceROView) || e.Hdr.CgroupId != cg.ID {
			t.Errorf("event %d: source %d cgroup %d, want %d and %d", i, e.Hdr.Source, e.Hdr.CgroupId, SourceROView, cg.ID)
		}
		if ROViewOp(e.Op) != w.op || e.Paths().Path != w.path || e.Paths().Relative {
			t.Errorf("event %d: %s %+v, want %s %s", i, ROViewOp(e.Op), e.Paths(), w.op, w.path)
		}
	}
}

// BenchmarkROViewSysExit measures what the attached program costs every
// system call of the machine: getppid(2) (no vDSO, no work) with the
// program detached, attached (the call returns 0: the program's first
// compare turns it away), and attached with an EROFS of a process that is
// in no session (the compare passes, the session lookup turns it away).
// The difference between the first two includes the kernel's own cost of
// an enabled sys_exit tracepoint (the syscall slow path on every task).
func BenchmarkROViewSysExit(b *testing.B) {
	testutil.RequireRoot(b)
	events, err := NewEventMaps(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	defer events.Close()
	var objs ROViewObjects
	if err := LoadROView(&objs, events); err != nil {
		b.Fatal(err)
	}
	defer objs.Close()
	getppid := func(b *testing.B) {
		for b.Loop() {
			unix.Getppid()
		}
	}
	// EROFS without a session: fchmod of a directory on a read-only
	// mount, from this process, which is in no session.
	erofs := func(b *testing.B) {
		dir := b.TempDir()
		if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
			b.Skipf("SKIPPED, NOT MEASURED: bind mount: %v", err)
		}
		defer unix.Unmount(dir, unix.MNT_DETACH)
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			b.Skipf("SKIPPED, NOT MEASURED: read-only remount: %v", err)
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		for b.Loop() {
			if err := unix.Fchmod(fd, 0o700); err != unix.EROFS {
				b.Fatalf("fchmod on a read-only mount: %v, want EROFS", err)
			}
		}
	}
	b.Run("getppid/detached", getppid)
	b.Run("erofs/detached", erofs)
	l, err := AttachROView(&objs)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.Run("getppid/attached", getppid)
	b.Run("erofs/attached-no-session", erofs)
}
