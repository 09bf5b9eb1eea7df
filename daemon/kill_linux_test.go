//go:build linux

package daemon

import (
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startDaemonProcess runs the daemon as a separate process (this test
// binary in daemon mode), so that it can be killed with SIGKILL.
func (w *world) startDaemonProcess(t *testing.T) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	o, _ := json.Marshal(daemonProcOpts{Socket: w.socket, ManagedDir: w.opts.ManagedDir, AuditPath: w.audit,
		StateDir: w.opts.StateDir, PinDir: w.opts.PinDir, Parent: w.opts.Cgroup.Parent, RegistryDir: w.opts.Registry.Dir})
	cmd := exec.Command(helper)
	cmd.Env = []string{"PATH=/usr/bin:/bin", helperModeEnv + "=daemon", daemonOptsEnv + "=" + string(o)}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); !Available(w.socket); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon process not answering:\n%s", out.String())
		}
	}
	return cmd, out
}

// kill -9 of the daemon: an attached process stays in its session (the
// cgroup, and every pinned layer, do not depend on the daemon), a run
// session's command dies with its supervisor instead of running on
// unsupervised, its client reports the loss; a new daemon adopts the
// attach session for its owner and stops what is left of the run session.
func TestDaemonKill9AndRestart(t *testing.T) {
	w := newWorld(t)
	d1, _ := w.startDaemonProcess(t)

	sleeper := execCommand("sleep", "60")
	sleeper.SysProcAttr.Credential = credentialFor(nobody)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	res := w.runHelper(t, nobody, w.ws, nil, "attach", itoa(sleeper.Process.Pid))
	if res.code != 0 {
		t.Fatalf("attach: %d %s", res.code, res.stderr)
	}
	var ar AttachResult
	json.Unmarshal([]byte(res.stdout), &ar)
	attached := ar.Session.ID

	runner := exec.Command(helper, w.ws, "sh", "-c", "echo started; exec sleep 60")
	runner.Dir = w.ws
	runner.Env = []string{"PATH=/usr/bin:/bin", helperModeEnv + "=run", helperSocketEnv + "=" + w.socket}
	runOut := &syncBuffer{}
	runner.Stdout, runner.Stderr = runOut, runOut
	runner.SysProcAttr = &syscall.SysProcAttr{Credential: credentialFor(nobody)}
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Process.Kill(); runner.Wait() })
	var runSession string
	var runPID int
	for deadline := time.Now().Add(10 * time.Second); runPID == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run session did not start: %s", runOut.String())
		}
		ids, _ := cgroupSessions(w)
		for _, id := range ids {
			if e, err := w.opts.Registry.Get(id); err == nil && id != attached && e.PID > 0 && strings.Contains(runOut.String(), "started") {
				runSession, runPID = id, e.PID
			}
		}
	}

	d1.Process.Signal(syscall.SIGKILL)
	d1.Wait()

	err := runner.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(runOut.String(), "lost the daemon during session "+runSession) {
		t.Fatalf("run client after the daemon died: %v\n%s", err, runOut.String())
	}
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(runPID, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run session's command (pid %d) survived its supervisor", runPID)
		}
	}
	if id, in, _ := sessionOfPID(w, sleeper.Process.Pid); !in || id != attached {
		t.Fatalf("attached process left its session after the daemon died: %q %v", id, in)
	}

	_, log2 := w.startDaemonProcess(t)
	if !strings.Contains(log2.String(), "session "+attached+" (uid 65534) adopted") {
		t.Fatalf("restarted daemon did not adopt %s:\n%s", attached, log2.String())
	}
	ids, _ := cgroupSessions(w)
	if strings.Contains(strings.Join(ids, " "), runSession) {
		t.Fatalf("the dead run session %s was not cleaned up: %v\n%s", runSession, ids, log2.String())
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "sessions"); !strings.Contains(res.stdout, attached) {
		t.Fatalf("owner does not see the adopted session: %s %s", res.stdout, res.stderr)
	}
	if res := w.runHelper(t, nobody, w.ws, nil, "stop", attached); res.code != 0 {
		t.Fatalf("owner cannot stop the adopted session: %s", res.stderr)
	}
	if st, err := sleeper.Process.Wait(); err != nil || st.Success() {
		t.Fatalf("stopped adopted session's process: %v %v, want killed", st, err)
	}
}
