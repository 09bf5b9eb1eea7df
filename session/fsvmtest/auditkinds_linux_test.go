//go:build linux

package fsvmtest

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
)

// TestOxsuperviseInsideSessionIsQuiet: an agent may run oxsupervise in its
// session (to ask for an approval, read its policy). The binary makes no
// bpf(2) call when it starts (cilium/ebpf's rlimit package would, from its
// init), so doing so leaves no self-protection refusal in the audit log
// that would read as the agent reaching for BPF.
func TestOxsuperviseInsideSessionIsQuiet(t *testing.T) {
	requireBPFLSM(t)
	e := newEnv(t)
	cli := os.Getenv(cliEnv)
	code, stdout, stderr := e.runCLI(t, []string{"CLI=" + cli}, `"$CLI" --help >/dev/null 2>&1; "$CLI" policy show >/dev/null 2>&1; "$SELF" `+fsopVerb+` write "$OUT/marker"`)
	if code != 0 || strings.TrimSpace(stdout) != "EACCES" {
		t.Fatalf("run: exit %d, stdout %q (want the marker write refused)\nstderr: %s", code, stdout, stderr)
	}
	id, _ := sessionOf(t, e.auditLog, 0)
	marker := false
	for _, r := range records(t, e.auditLog) {
		if r.Ox.Kind != audit.KindDenial || r.Ox.Session != id {
			continue
		}
		if r.File != nil && r.File.Path == filepath.Join(e.outside, "marker") {
			marker = true
			continue
		}
		t.Errorf("refusal while oxsupervise ran in the session: %s by %+v", r.Message, r.Process)
	}
	// The marker proves the log was read after the session's refusals
	// were written, so an absent bpf refusal is not an unread one.
	if !marker {
		t.Error("the marker refusal is not in the audit log")
	}
}

// TestRunAuditsEveryRefusalKind: refusals of this session's new kinds —
// a deny-read name glob, an AF_UNIX socket outside the writable roots, a
// socket family the network policy does not cover — each reach the audit
// log through `oxsupervise run` with the errno, class, rule and what was
// reached for, while the same calls' allowed neighbours succeed.
func TestRunAuditsEveryRefusalKind(t *testing.T) {
	requireBPFLSM(t)
	e := newEnv(t)
	// A .env that exists when the session starts is hidden by run's
	// mount namespace; one created during the session is the kernel
	// programs' to refuse by name.
	mustWrite(t, filepath.Join(e.ws, ".env.example"), "SECRET=\n")
	sock := filepath.Join(e.outside, "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The shell's pid is every refused process's parent.
	script := `echo "sh=$$" >&2; "$SELF" ` + fsopVerb + ` write .env.local >/dev/null; "$SELF" ` + fsopVerb + ` read .env.local; "$SELF" ` + fsopVerb + ` read .env.example; ` +
		`"$SELF" ` + fsopVerb + ` unix-connect "$OUT/docker.sock"; "$SELF" ` + fsopVerb + ` socket ` + strconv.Itoa(unix.AF_PACKET)
	code, stdout, stderr := e.runCLI(t, nil, script)
	if code != 0 {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	want := []string{"EACCES", "OK", "EACCES", "EPERM"}
	if got := strings.Fields(stdout); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("outcomes %q, want %q (read a new .env.local, read .env.example, connect outside, AF_PACKET)\nstderr: %s", got, want, stderr)
	}
	id, _ := sessionOf(t, e.auditLog, 0)
	m := regexp.MustCompile(`(?m)^sh=(\d+)$`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("the script did not say its pid:\n%s", stderr)
	}
	shPID, _ := strconv.Atoi(m[1])
	tests := []struct {
		name, action string
		class        audit.Class
		errno        unix.Errno
		path         string // file.path, "" for self-protection
		rule         string // part of oxsupervise.rule
	}{
		{"deny-read glob", "open", audit.ClassFile, unix.EACCES, filepath.Join(e.ws, ".env.local"), ".env*"},
		{"unix socket outside", "unix_connect", audit.ClassFile, unix.EACCES, sock, "allow_unix_sockets"},
		{"packet socket", "socket", audit.ClassSelfProtection, unix.EPERM, "", "address family " + strconv.Itoa(unix.AF_PACKET)},
	}
	records := records(t, e.auditLog)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range records {
				if r.Ox.Kind != audit.KindDenial || r.Ox.Session != id || r.Ox.Layer != audit.LayerBPFLSM || r.Event.Action != tt.action {
					continue
				}
				p := ""
				if r.File != nil {
					p = r.File.Path
				}
				if p != tt.path {
					continue
				}
				if r.Ox.Class != tt.class || r.Ox.Errno != int(tt.errno) || !strings.Contains(r.Ox.Rule, tt.rule) {
					t.Fatalf("record %+v: want class %s errno %d rule containing %q", r.Ox, tt.class, tt.errno, tt.rule)
				}
				if r.Process == nil || r.Process.PID == 0 {
					t.Fatalf("record without the process: %+v", r)
				}
				// The kernel's word: the process has exited by the time
				// the record is written, its parent is in the event.
				if r.Process.Parent == nil || r.Process.Parent.PID != shPID {
					t.Fatalf("process.parent %+v, want the shell, pid %d", r.Process.Parent, shPID)
				}
				return
			}
			b, _ := os.ReadFile(e.auditLog)
			t.Fatalf("no %s denial of %q in session %s:\n%s", tt.action, tt.path, id, b)
		})
	}
}
