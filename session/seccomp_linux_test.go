//go:build linux

package session_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunSeccompSockets performs the socket and io_uring attempts the
// session's seccomp filter refuses: families the network layers cannot
// judge (AF_PACKET, AF_VSOCK), raw sockets of inet and inet6, and
// io_uring_setup, under network none; under network full only io_uring
// and what the missing capabilities refuse. Every refusal of the filter is
// in the audit log (layer seccomp), attributed to the session although
// its process has exited.
func TestRunSeccompSockets(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	// What a family gives outside any session, so that "allowed" means
	// what this kernel does (a kernel without vsock says EAFNOSUPPORT
	// itself).
	probe := func(domain, typ int) string {
		fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return unix.ErrnoName(err.(unix.Errno))
		}
		unix.Close(fd)
		return "OK"
	}
	vsockHost := probe(unix.AF_VSOCK, unix.SOCK_STREAM)
	for _, tc := range []struct {
		net      string
		ops      []op
		audited  map[string]int // action -> minimum number of seccomp records
		notAudit []string       // actions that must have no seccomp record
	}{
		{"none", []op{
			{"packet-raw", "socket 17 3", []string{"EAFNOSUPPORT"}},
			{"packet-dgram", "socket 17 2", []string{"EAFNOSUPPORT"}},
			{"vsock", "socket 40 1", []string{"EAFNOSUPPORT"}},
			{"inet-raw", "socket 2 3", []string{"EPERM"}},
			{"inet6-raw", "socket 10 3", []string{"EPERM"}},
			{"inet-packet-type", "socket 2 10", []string{"EPERM"}},
			{"inet-tcp", "socket 2 1", ok},
			{"inet6-udp", "socket 10 2", ok},
			{"unix", "socket 1 1", ok},
			{"netlink", "socket 16 3", ok},
			{"io_uring", "io_uring_setup -", []string{"ENOSYS"}},
		}, map[string]int{"socket": 6, "io_uring_setup": 1}, nil},
		{"full", []op{
			// No seccomp rule: the capability layer refuses (no CAP_NET_RAW).
			{"packet-raw", "socket 17 3", []string{"EPERM"}},
			{"vsock", "socket 40 1", []string{vsockHost}},
			{"inet-tcp", "socket 2 1", ok},
			{"io_uring", "io_uring_setup -", []string{"ENOSYS"}},
		}, map[string]int{"io_uring_setup": 1}, []string{"socket"}},
	} {
		t.Run("net-"+tc.net, func(t *testing.T) {
			logPath := filepath.Join(e.base, "audit-"+tc.net+".jsonl")
			e.runOpsWith(t, []string{"--audit-log", logPath, "--net", tc.net}, tc.ops)
			actions := seccompDenials(t, logPath)
			if !kernelAuditOK(t) {
				return
			}
			for action, n := range tc.audited {
				if actions[action] < n {
					t.Errorf("%d seccomp records for %s, want at least %d; log:\n%s", actions[action], action, n, mustRead(t, logPath))
				}
			}
			for _, action := range tc.notAudit {
				if actions[action] != 0 {
					t.Errorf("%d seccomp records for %s under network %s, want none", actions[action], action, tc.net)
				}
			}
		})
	}
}

// kernelAuditOK says whether seccomp refusals can reach the audit log
// here, and says loudly when not.
func kernelAuditOK(t *testing.T) bool {
	t.Helper()
	if _, err := os.Stat("/proc/self/loginuid"); err != nil {
		t.Logf("!!! seccomp audit assertions SKIPPED: kernel built without CONFIG_AUDIT")
		return false
	}
	b, err := os.ReadFile("/proc/sys/kernel/seccomp/actions_logged")
	if err != nil || !strings.Contains(string(b), "errno") {
		t.Logf("!!! seccomp audit assertions SKIPPED: kernel.seccomp.actions_logged lacks errno (%q, %v)", b, err)
		return false
	}
	return true
}

// seccompDenials counts the seccomp denial records of fsop by action.
func seccompDenials(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	out := map[string]int{}
	var session string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec logRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("bad audit line %q: %v", line, err)
		}
		if rec.Ox.Kind == "session_start" {
			session = rec.Ox.Session
		}
		if rec.Ox.Kind == "denial" && rec.Ox.Layer == "seccomp" && rec.Process != nil && rec.Process.Name == "fsop" {
			if rec.Ox.Session != session || session == "" {
				t.Errorf("seccomp record of session %q in the log of session %q", rec.Ox.Session, session)
			}
			out[rec.Event.Action]++
		}
	}
	return out
}
