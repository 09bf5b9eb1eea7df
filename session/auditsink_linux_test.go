//go:build linux

package session_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/session"
)

// openFDsOf counts this process's descriptors open on path.
func openFDsOf(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// A session has one audit sink: Run opens the log once and hands that sink
// to every layer, and the supervisor's own records go through it too.
func TestRunOpensTheAuditLogOnce(t *testing.T) {
	e, self := runEnv(t)
	c := compiledFor(t, e)
	layers := []*fakeLayer{{name: "one"}, {name: "two"}}
	fds := -1
	code, err := session.Run(context.Background(), session.RunOptions{
		Policy: c, Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + e.home},
		Dir: e.ws, SelfExe: self, Registry: session.Registry{Dir: filepath.Join(e.base, "registry")},
		Layers:  []session.SessionLayer{layers[0], layers[1]},
		OnStart: func(session.SessionInfo) { fds = openFDsOf(t, c.Audit.Path) },
	})
	if err != nil || code != 0 {
		t.Fatalf("Run: code %d, %v", code, err)
	}
	if fds != 1 {
		t.Errorf("%d descriptors open on the audit log while the session ran, want 1", fds)
	}
	for _, l := range layers {
		if l.applied == nil || l.applied.Audit == nil || l.applied.Audit != layers[0].applied.Audit {
			t.Fatalf("layer %s was not given the session's sink: %+v", l.name, l.applied)
		}
		if l.applied.Audit.Path() != c.Audit.Path {
			t.Errorf("layer %s sink writes %s, want %s", l.name, l.applied.Audit.Path(), c.Audit.Path)
		}
	}
	if n := openFDsOf(t, c.Audit.Path); n != 0 {
		t.Errorf("%d descriptors still open on the audit log after Run", n)
	}
	var kinds []audit.Kind
	for _, r := range readAudit(t, c.Audit.Path) {
		kinds = append(kinds, r.Ox.Kind)
	}
	if len(kinds) != 2 || kinds[0] != audit.KindSessionStart || kinds[1] != audit.KindSessionStop {
		t.Errorf("audit log holds %v, want session_start then session_stop", kinds)
	}
}

// failFsyncEnv, set, makes TestRunWarnsWhenSessionStopIsNotSynced the
// child whose fsyncs fail.
const failFsyncEnv = "OXS_TEST_FSYNC_FAILS"

// session_stop's sync runs behind its write (the sink starts it), and the
// session is done with it only once it is synced: Run, or with
// RunOptions.BeforeExit the work Run leaves there, closes the sink after
// that sync, and says on Warn when it failed. The test runs again in a
// child process whose every fsync the kernel fails with EIO (a seccomp
// filter on all its threads): the records are written, their sync is not.
func TestRunWarnsWhenSessionStopIsNotSynced(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	cgroup2Mount(t)
	self := selfExe(t)
	if os.Getenv(failFsyncEnv) == "" {
		cmd := exec.Command(self, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), failFsyncEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the child whose fsyncs fail: %v\n%s", err, out)
		}
		if n := strings.Count(string(out), "--- PASS: "+t.Name()+"/"); n != 2 {
			t.Fatalf("the child passed %d cases, want 2:\n%s", n, out)
		}
		return
	}
	failFsync(t)
	for _, tt := range []struct {
		name       string
		beforeExit bool
	}{
		{"Run closes the sink", false},
		{"Run leaves the sink's close to BeforeExit", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			c := compiledFor(t, e)
			var warn safeBuffer
			var beforeExit *sync.WaitGroup
			if tt.beforeExit {
				beforeExit = &sync.WaitGroup{}
			}
			var info session.SessionInfo
			code, err := session.Run(context.Background(), session.RunOptions{
				Policy: c, Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + e.home},
				Dir: e.ws, SelfExe: self, Registry: session.Registry{Dir: filepath.Join(e.base, "registry")},
				Warn: &warn, BeforeExit: beforeExit,
				OnStart: func(i session.SessionInfo) { info = i },
			})
			if err != nil || code != 0 {
				t.Fatalf("Run: code %d, %v", code, err)
			}
			if beforeExit != nil {
				beforeExit.Wait()
			}
			if n := openFDsOf(t, c.Audit.Path); n != 0 {
				t.Errorf("%d descriptors still open on the audit log once the session is done with it", n)
			}
			var kinds []audit.Kind
			for _, r := range readAudit(t, c.Audit.Path) {
				if r.Ox.Session == info.ID {
					kinds = append(kinds, r.Ox.Kind)
				}
			}
			if len(kinds) != 2 || kinds[0] != audit.KindSessionStart || kinds[1] != audit.KindSessionStop {
				t.Errorf("session %s's records: %v, want session_start then session_stop", info.ID, kinds)
			}
			want := "warning: audit log: fsync audit log " + c.Audit.Path + ": sync " + c.Audit.Path + ": " + unix.EIO.Error() + "\n"
			if w := warn.String(); strings.Count(w, want) != 1 {
				t.Errorf("warnings %q do not say once %q", w, want)
			}
		})
	}
}

// failFsync makes the kernel fail every fsync and fdatasync of this
// process (all its threads, and the processes it starts) with EIO, and
// checks that it does.
func failFsync(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("SKIPPED, NOT PASSED: the fsync filter is written for amd64, not %s", runtime.GOARCH)
	}
	const (
		archOff = 4 // offsetof(struct seccomp_data, arch)
		nrOff   = 0
	)
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: archOff},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: unix.AUDIT_ARCH_X86_64},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: nrOff},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 2, Jf: 0, K: unix.SYS_FSYNC},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, Jf: 0, K: unix.SYS_FDATASYNC},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EIO)},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&prog))); errno != 0 {
		t.Fatalf("install the fsync filter: %v", errno)
	}
	f, err := os.CreateTemp(t.TempDir(), "fsync-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); !errors.Is(err, unix.EIO) {
		t.Fatalf("fsync under the filter: %v, want EIO", err)
	}
}
