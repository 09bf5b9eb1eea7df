//go:build linux

package fsvmtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/escapetest"
	"github.com/openoxide/oxsupervise/internal/testutil"
	"github.com/openoxide/oxsupervise/session"
)

// TestAttachRefusesCloneIntoCgroup attaches a running root shell and lets
// it try to leave its group with clone3(CLONE_INTO_CGROUP) into the
// cgroup2 root (package escapetest's op, the escape table's
// cgroups/clone3-into-cgroup-root row): an attached process has no
// seccomp filter, so BPF-LSM's task_alloc hook is what refuses it, with
// EPERM and a record. The same call outside any session (the independent
// probe) starts a child in the root; clone3 without the flag (a fork)
// still works in the session.
func TestAttachRefusesCloneIntoCgroup(t *testing.T) {
	requireBPFLSM(t)
	e := newEnv(t)
	root, err := testutil.Cgroup2Root()
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Base(e.base)
	if probe := escapetest.ProbeCloneIntoCgroup(t, e.self, root, "oxs-attach-clone3-probe-"+base); !escapetest.MovedToRoot(probe) {
		testutil.SkipUnlessVM(t, "clone3(CLONE_INTO_CGROUP) does not start a child in the cgroup2 root outside any session either (probe: %q): nothing to refuse on this kernel", probe)
	}

	var warn syncBuffer
	layer, err := session.NewFSLayer(session.FSConfig{Warn: &warn})
	if err != nil {
		t.Fatalf("NewFSLayer where BPF-LSM is usable: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			layer.Close()
		}
	}()
	marker := "oxs-attach-clone3-session-" + base
	escape := strings.Join(testutil.OpArgs(escapetest.OpName), " ")
	sh := exec.Command("sh", "-c", `read go
"$SELF" `+escape+` clone3-into-cgroup "$ROOT" "$MARKER"
"$SELF" `+escape+` clone3-plain`)
	sh.Env = []string{"PATH=/usr/bin:/bin", "SELF=" + e.self, "ROOT=" + root, "MARKER=" + marker}
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, os.Stderr
	stdin, entry, _ := attachWaitingShell(t, e, sh, layer)
	fmt.Fprintln(stdin, "go")
	stdin.Close()
	if err := sh.Wait(); err != nil {
		t.Fatalf("attached shell: %v\n%s", err, out.String())
	}
	got := strings.Fields(out.String())
	if want := []string{"EPERM", "OK"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("attached shell: clone3(CLONE_INTO_CGROUP) of %s, then clone3 without it: %v, want %v", root, got, want)
	}
	// The op's child would carry the marker: none lives, in the root or
	// anywhere.
	if pid, err := escapetest.LiveProcessWith(marker); err != nil || pid != 0 {
		cg, _ := cgroup.CgroupOf(pid)
		t.Errorf("a child of the refused clone3 lives: pid %d in cgroup %q (%v)", pid, cg, err)
	}
	// Close drains the refusals into the log, as `oxsupervise attach`
	// does when the session's processes are gone.
	if err := layer.Close(); err != nil {
		t.Errorf("layer close: %v", err)
	}
	closed = true
	var seen []string
	for _, r := range records(t, e.auditLog) {
		if r.Ox.Kind != audit.KindDenial {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s %s %s", r.Ox.Session, r.Ox.Layer, r.Event.Action))
		if r.Ox.Session != entry.ID || r.Ox.Layer != audit.LayerBPFLSM || r.Event.Action != "clone_into_cgroup" {
			continue
		}
		if r.Ox.Class != audit.ClassSelfProtection || r.Ox.Errno != int(unix.EPERM) || r.Error == nil || r.Error.Code != "EPERM" {
			t.Errorf("clone_into_cgroup denial: class %q errno %d %+v, want self-protection EPERM", r.Ox.Class, r.Ox.Errno, r.Error)
		}
		if r.Process == nil || r.Process.PID == 0 || r.User == nil || r.User.ID != "0" {
			t.Errorf("clone_into_cgroup denial: process %+v user %+v", r.Process, r.User)
		}
		return
	}
	t.Errorf("no bpf-lsm clone_into_cgroup denial in session %s; denials: %q", entry.ID, seen)
}
