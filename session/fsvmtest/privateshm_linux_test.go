//go:build linux

package fsvmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openoxide/oxsupervise/audit"
)

// TestPrivateShmBPFLSM: under BPF-LSM a workspace-write session writes
// its own /dev/shm (the tmpfs the supervisor made for it): a Python
// multiprocessing lock (sem_open there) and a plain file work, nothing of
// it reaches the host's /dev/shm, and nothing of it is a refusal.
func TestPrivateShmBPFLSM(t *testing.T) {
	requireBPFLSM(t)
	if err := exec.Command("python3", "-c", "import multiprocessing").Run(); err != nil {
		t.Skipf("SKIPPED, NOT PASSED: python3 with multiprocessing is not installed here (%v)", err)
	}
	e := newEnv(t)
	own := fmt.Sprintf("/dev/shm/oxs-own-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(own) })
	script := `python3 -c 'import multiprocessing as m; l=m.Lock(); l.acquire(); l.release(); print("lock=ok")'
"$SELF" ` + fsopVerb + ` write ` + own + `
ls -A /dev/shm`
	code, stdout, stderr := e.runCLI(t, nil, script)
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "lock=ok") {
		t.Errorf("multiprocessing lock failed inside the session:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if !strings.Contains(stdout, "\nOK\n") {
		t.Errorf("write %s inside the session did not say OK:\n%s\nstderr:\n%s", own, stdout, stderr)
	}
	if !strings.Contains(stdout, filepath.Base(own)) {
		t.Errorf("%s is not in the session's /dev/shm after its write:\n%s", own, stdout)
	}
	if _, err := os.Lstat(own); !os.IsNotExist(err) {
		t.Errorf("%s, written in the session, is in the host's /dev/shm (%v)", own, err)
	}
	id, layers := sessionOf(t, e.auditLog, 0)
	if !strings.Contains(layers, "bpf-lsm") {
		t.Fatalf("session layers %q: the session did not run under BPF-LSM", layers)
	}
	for _, r := range records(t, e.auditLog) {
		if r.Ox.Kind == audit.KindDenial && r.Ox.Session == id {
			t.Errorf("refusal in a session that only used its own /dev/shm: %+v file %+v", r.Ox, r.File)
		}
	}
}
