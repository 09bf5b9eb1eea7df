//go:build linux

package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRunNetwork proves that `run` without a cgroup network layer (forced
// unavailable here; the layer itself is tested in netlayer_linux_test.go)
// enforces network "none" (the default) with a private network namespace,
// keeps the session's own loopback working, and refuses an allowlist it
// cannot enforce instead of running with full network.
func TestRunNetwork(t *testing.T) {
	noCgroupNet := []string{"OXSUPERVISE_FORCE_UNAVAILABLE=network"}
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	hostAddr := ln.Addr().String()
	noLoopback := filepath.Join(e.base, "no-loopback.toml")
	mustWrite(t, noLoopback, "[network]\nloopback = \"none\"\n")

	for _, tc := range []struct {
		name           string
		flags          []string
		host, loopback []string
		reachesHost    bool
	}{
		// The session's 127.0.0.1 is its own: nothing listens there.
		{"default-none", nil, []string{"ECONNREFUSED"}, ok, false},
		{"none-loopback-none", []string{"--config", noLoopback}, []string{"ENETUNREACH"}, []string{"ENETUNREACH"}, false},
		{"full", []string{"--net", "full"}, ok, ok, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := accepted.Load()
			args := append(append([]string{"run"}, tc.flags...), "--", "sh", "-c",
				fmt.Sprintf(`printf 'host='; "$FSOP" connect %s; printf 'loopback='; "$FSOP" loopback`, hostAddr))
			r := e.run(t, noCgroupNet, args...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			got := map[string]string{}
			for _, line := range strings.Split(r.stdout, "\n") {
				if k, v, found := strings.Cut(line, "="); found {
					got[k] = v
				}
			}
			if !contains(tc.host, got["host"]) {
				t.Errorf("connect to the host's %s: got %q, want %v", hostAddr, got["host"], tc.host)
			}
			if !contains(tc.loopback, got["loopback"]) {
				t.Errorf("session-local loopback: got %q, want %v", got["loopback"], tc.loopback)
			}
			// Accept runs concurrently: give it a moment before judging.
			time.Sleep(100 * time.Millisecond)
			if reached := accepted.Load() > before; reached != tc.reachesHost {
				t.Errorf("host listener reached = %v, want %v", reached, tc.reachesHost)
			}
		})
	}

	t.Run("netns-unavailable", func(t *testing.T) {
		marker := filepath.Join(e.ws, "marker-netns")
		r := e.run(t, []string{"OXSUPERVISE_FORCE_UNAVAILABLE=network,network-namespace"}, "run", "--", "touch", marker)
		if r.code != 125 || exists(marker) || !strings.Contains(r.stderr, "layer network-namespace") {
			t.Errorf("exit %d (want 125), marker %v; stderr:\n%s", r.code, exists(marker), r.stderr)
		}
	})
	t.Run("allowlist-refused", func(t *testing.T) {
		marker := filepath.Join(e.ws, "marker-allowlist")
		r := e.run(t, noCgroupNet, "run", "--net", "allowlist", "--allow-net", "127.0.0.1", "--", "touch", marker)
		if r.code != 125 {
			t.Errorf("exit %d, want 125; stderr:\n%s", r.code, r.stderr)
		}
		if exists(marker) {
			t.Error("the command ran although its network allowlist cannot be enforced")
		}
		if !strings.Contains(r.stderr, "layer network") {
			t.Errorf("the error does not name the network layer:\n%s", r.stderr)
		}
	})
}

// TestRunSupervisorKilled proves that a SIGKILLed supervisor takes the
// command with it, also when the command runs as another user (the
// kernel clears the parent-death signal when the launcher changes uid).
func TestRunSupervisorKilled(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	for _, user := range []string{"0", "65534"} {
		t.Run("uid-"+user, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "run", "--user", user, "--audit-log", filepath.Join(e.base, "audit.jsonl"),
				"--", "sh", "-c", `echo $$; exec sleep 1000`)
			cmd.Dir = e.ws
			cmd.Env = append(os.Environ(), "HOME="+e.home)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pid int
			if _, err := fmt.Fscan(out, &pid); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("read the command's pid: %v", err)
			}
			// The session cgroup outlives a SIGKILLed supervisor (nobody is
			// left to remove it); clean it up after the test.
			cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
			t.Cleanup(func() { removeLeftoverSession(t, string(cg)) })
			// The command must have exec'd sleep before the supervisor dies.
			time.Sleep(200 * time.Millisecond)
			cmd.Process.Signal(unix.SIGKILL)
			cmd.Wait()
			// `sessions` tells what is left apart from live sessions.
			var id string
			for _, line := range strings.Split(string(cg), "\n") {
				if i := strings.Index(line, "/oxsupervise/"); i >= 0 && strings.HasPrefix(line, "0::") {
					id = filepath.Base(line[i:])
				}
			}
			r := e.run(t, nil, "sessions", "--json")
			var list []struct{ ID, State string }
			if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
				t.Fatalf("sessions --json: %v\n%s", err, r.stdout)
			}
			state := ""
			for _, st := range list {
				if st.ID == id {
					state = st.State
				}
			}
			if state != "orphaned" {
				t.Errorf("sessions lists %s as %q, want orphaned:\n%s", id, state, r.stdout)
			}
			deadline := time.Now().Add(3 * time.Second)
			for alive(pid) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if alive(pid) {
				unix.Kill(pid, unix.SIGKILL)
				t.Errorf("the command (pid %d, uid %s) outlived its SIGKILLed supervisor", pid, user)
			}
		})
	}
}

// removeLeftoverSession kills and removes the cgroup v2 group named in a
// /proc/PID/cgroup text, if it is an oxsupervise session.
func removeLeftoverSession(t *testing.T, procCgroup string) {
	cg2 := cgroup2Mount(t)
	for _, line := range strings.Split(procCgroup, "\n") {
		rel, found := strings.CutPrefix(line, "0::")
		if !found || !strings.Contains(rel, "/oxsupervise/s-") {
			continue
		}
		dir := filepath.Join(cg2, rel)
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		os.Remove(filepath.Join("/run/oxsupervise/sessions", filepath.Base(dir)+".json"))
	}
}
