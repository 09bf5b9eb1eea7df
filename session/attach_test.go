//go:build linux

package session_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openoxide/oxsupervise/internal/procfs"
	"github.com/openoxide/oxsupervise/internal/testutil"
)

// startTree starts, outside any session, a shell with a multi-threaded
// child and a child that forks without pause.
func startTree(t *testing.T) *exec.Cmd {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: needed for the multi-threaded process")
	}
	script := fmt.Sprintf(`%s -c 'import threading, time
for _ in range(4):
    threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()
time.sleep(1000)' &
while :; do /bin/true; done &
wait`, py)
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Wait until python's threads exist.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range descendants(cmd.Process.Pid) {
			if threads(p) >= 5 {
				return cmd
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the multi-threaded child did not start")
	return nil
}

// descendants scans /proc independently of the code under test.
func descendants(root int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procfs.ReadStat(pid); err == nil {
			parent[pid] = st.PPID
		}
	}
	var out []int
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

func threads(pid int) int {
	e, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return len(e)
}

// taskAlive reports whether thread tid of pid exists and has not exited.
func taskAlive(pid int, tid string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, tid))
	if err != nil {
		return false
	}
	st, err := procfs.ParseStat(b)
	return err == nil && st.Alive()
}

func cgroupOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "0::"); ok {
			return rest
		}
	}
	return ""
}

// cgroupOnly writes a policy that needs no network rules (full network,
// every loopback service), so attach needs no layer that lives in its
// process and returns at once; these tests are about moving processes.
func (e *env) cgroupOnly(t *testing.T) string {
	t.Helper()
	p := filepath.Join(e.base, "cgroup-only.toml")
	mustWrite(t, p, "[network]\npolicy = \"full\"\nloopback = \"all\"\n")
	return p
}

func TestAttachMovesWholeTree(t *testing.T) {
	requireRoot(t)
	cg2 := cgroup2Mount(t)
	e := newEnv(t)
	tree := startTree(t)
	root := tree.Process.Pid

	// The policy has filesystem rules: without BPF-LSM only
	// --network-only attaches it (TestAttachFailsClosedWithoutBPFLSM).
	r := e.run(t, nil, "attach", "--config", e.cgroupOnly(t), "--network-only", "--pid", strconv.Itoa(root))
	if r.code != 0 {
		t.Fatalf("attach: exit %d\n%s", r.code, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	t.Cleanup(func() { e.run(t, nil, "stop", id) })
	if !testutil.IndependentLSMProbe(t).Usable() && (!strings.Contains(r.stderr, "filesystem rules for attach need BPF-LSM") ||
		!strings.Contains(r.stderr, "as asked (--network-only)") || !strings.Contains(r.stderr, "does NOT enforce the policy's filesystem rules")) {
		t.Errorf("attach did not say that filesystem rules are not enforced:\n%s", r.stderr)
	}
	group := filepath.Join(cg2, "oxsupervise", id)
	want := "/oxsupervise/" + id

	// Check twice: once right after attach, once after the forking child
	// had time to fork many more times.
	for round := 0; round < 2; round++ {
		procs := mustRead(t, filepath.Join(group, "cgroup.procs"))
		threads := func() string {
			return " " + strings.Join(strings.Fields(mustRead(t, filepath.Join(group, "cgroup.threads"))), " ") + " "
		}
		cgThreads := threads()
		all := append([]int{root}, descendants(root)...)
		multi := false
		for _, pid := range all {
			got := cgroupOf(pid)
			if got == "" {
				continue // exited meanwhile (the forking loop's /bin/true)
			}
			if got != want {
				t.Errorf("round %d: pid %d is in %s, not in the session %s", round, pid, got, want)
			}
			tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
			if len(tasks) >= 5 {
				multi = true
			}
			for _, task := range tasks {
				if strings.Contains(cgThreads, " "+task.Name()+" ") {
					continue
				}
				// Forked after cgroup.threads was read: read it again. A
				// task that exited is no longer in cgroup.threads although
				// its /proc entry stays until it is reaped (the forking
				// loop's /bin/true as a zombie): only a live one counts.
				cgThreads = threads()
				if !strings.Contains(cgThreads, " "+task.Name()+" ") && taskAlive(pid, task.Name()) {
					t.Errorf("round %d: thread %s of pid %d not in cgroup.threads", round, task.Name(), pid)
				}
			}
		}
		if !multi {
			t.Errorf("round %d: the multi-threaded process was not among the attached tree", round)
		}
		if !strings.Contains(" "+strings.Join(strings.Fields(procs), " ")+" ", " "+strconv.Itoa(root)+" ") {
			t.Errorf("round %d: root pid %d not in cgroup.procs %q", round, root, procs)
		}
		if ev := mustRead(t, filepath.Join(group, "cgroup.events")); !strings.Contains(ev, "frozen 0") {
			t.Errorf("round %d: session left frozen: %s", round, ev)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// sessions lists it.
	r = e.run(t, nil, "sessions", "--json")
	var list []struct {
		ID    string `json:"id"`
		Kind  string `json:"kind"`
		State string `json:"state"`
		Procs []int  `json:"procs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("sessions --json: %v\n%s", err, r.stdout)
	}
	found := false
	for _, s := range list {
		if s.ID == id {
			found = true
			if s.Kind != "attach" || s.State != "running" || len(s.Procs) < 3 {
				t.Errorf("sessions --json entry %+v", s)
			}
		}
	}
	if !found {
		t.Errorf("session %s missing from sessions --json:\n%s", id, r.stdout)
	}
	if r := e.run(t, nil, "attach", "--network-only", "--pid", strconv.Itoa(root)); r.code == 0 || !strings.Contains(r.stderr, "already in session "+id) {
		t.Errorf("second attach: exit %d, stderr %q", r.code, r.stderr)
	}

	// stop kills all of it and removes the session.
	if r := e.run(t, nil, "stop", id); r.code != 0 {
		t.Fatalf("stop: exit %d\n%s", r.code, r.stderr)
	}
	err := tree.Wait()
	if ws, ok := tree.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("tree root did not die of SIGKILL: %v", err)
	}
	if left := descendants(root); len(left) > 0 {
		t.Errorf("processes survived stop: %v", left)
	}
	if exists(group) {
		t.Errorf("cgroup %s left after stop", group)
	}
	if exists(filepath.Join("/run/oxsupervise/sessions", id+".json")) {
		t.Errorf("registry entry left after stop")
	}
}

func TestAttachRefuses(t *testing.T) {
	requireRoot(t)
	cgroup2Mount(t)
	e := newEnv(t)
	other := exec.Command("sleep", "1000")
	other.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })

	for _, tc := range []struct {
		name, pid, want string
		code            int
	}{
		{"init", "1", "init process", 1},
		{"kernel-thread", "2", "kernel thread", 1},
		{"ancestor-of-supervisor", strconv.Itoa(os.Getpid()), "ancestor of the supervisor", 1},
		{"no-such-pid", "999999999", "no such process", 1},
		{"other-user", strconv.Itoa(other.Process.Pid), "belongs to uid 65534", 1},
		{"not-a-number", "abc", "invalid argument", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run(t, nil, "attach", "--config", e.cgroupOnly(t), "--network-only", "--pid", tc.pid)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q (want %q)", r.code, tc.code, r.stderr, tc.want)
			}
		})
	}
	t.Run("network-none-unenforceable", func(t *testing.T) {
		// The default policy says network none; attach cannot enforce it
		// without the cgroup network layer (forced unavailable), so it
		// must refuse, not confine the process into a cgroup and call
		// that a session.
		r := e.run(t, []string{"OXSUPERVISE_FORCE_UNAVAILABLE=network"}, "attach", "--network-only", "--allow-other-user", "--pid", strconv.Itoa(other.Process.Pid))
		if r.code != 125 || !strings.Contains(r.stderr, "layer network") {
			t.Errorf("exit %d (want 125), stderr %q (want it to name layer network)", r.code, r.stderr)
		}
		if got := cgroupOf(other.Process.Pid); strings.Contains(got, "/oxsupervise/") {
			t.Errorf("pid moved into %s although attach refused", got)
		}
	})
	t.Run("other-user-allowed", func(t *testing.T) {
		r := e.run(t, nil, "attach", "--config", e.cgroupOnly(t), "--network-only", "--allow-other-user", "--pid", strconv.Itoa(other.Process.Pid))
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		if got := cgroupOf(other.Process.Pid); got != "/oxsupervise/"+id {
			t.Errorf("pid in %s, want session %s", got, id)
		}
		if r := e.run(t, nil, "stop", id); r.code != 0 {
			t.Errorf("stop: %s", r.stderr)
		}
	})
	if r := e.run(t, nil, "stop", "s-doesnotexist"); r.code != 1 || !strings.Contains(r.stderr, "no such session") {
		t.Errorf("stop of a missing session: exit %d, %q", r.code, r.stderr)
	}
}

func TestStopRunSession(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	marker := fmt.Sprintf("oxs-stop-test-%d", time.Now().UnixNano())
	cmd := exec.Command(bin, "run", "--audit-log", filepath.Join(t.TempDir(), "audit.jsonl"), "--", "sh", "-c", "sleep 100", marker)
	cmd.Dir = e.ws
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r := e.run(t, nil, "sessions", "--json")
		var list []struct {
			ID      string   `json:"id"`
			Command []string `json:"command"`
			State   string   `json:"state"`
		}
		json.Unmarshal([]byte(r.stdout), &list)
		for _, s := range list {
			if len(s.Command) == 4 && s.Command[3] == marker && s.State == "running" {
				id = s.ID
			}
		}
	}
	if id == "" {
		t.Fatal("the run session never showed up in sessions --json")
	}
	if r := e.run(t, nil, "stop", id); r.code != 0 {
		t.Fatalf("stop: exit %d: %s", r.code, r.stderr)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+9 {
		t.Errorf("run exited %d after stop, want %d (its command was SIGKILLed)", code, 128+9)
	}
	if r := e.run(t, nil, "sessions", "--json"); strings.Contains(r.stdout, id) {
		t.Errorf("session %s still listed after stop:\n%s", id, r.stdout)
	}
}
