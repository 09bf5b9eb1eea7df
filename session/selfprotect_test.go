//go:build linux

package session_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns a pty's master and slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	// Non-blocking, so that os.File polls it and read deadlines work.
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pty available (%v): cannot give the session a controlling terminal", err)
	}
	m := os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestRunRefusesTIOCSTI proves that a command cannot push keystrokes into
// the terminal it shares with the invoking shell (which would run them
// after the session, unconfined). The session's supervisor gets a pty as
// its controlling terminal, the way an interactive `oxsupervise run` has.
func TestRunRefusesTIOCSTI(t *testing.T) {
	requireRoot(t)
	landlockABI(t)
	e := newEnv(t)
	master, slave := openPTY(t)
	for _, user := range []string{"0", "65534"} {
		t.Run("uid-"+user, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "run", "--user", user, "--audit-log", filepath.Join(e.base, "audit.jsonl"),
				"--", "sh", "-c", `"$FSOP" tiocsti 'echo oxs-injected'`)
			cmd.Dir = e.ws
			cmd.Env = append(os.Environ(), "HOME="+e.home, "FSOP="+fsop)
			var stdout, stderr bytes.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &stdout, &stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Run(); err != nil {
				t.Fatalf("run: %v\n%s", err, stderr.String())
			}
			if got := strings.TrimSpace(stdout.String()); got != "EPERM" {
				t.Errorf("TIOCSTI on the session's terminal: %q, want EPERM", got)
			}
			// Whatever reached the input queue is echoed to the master.
			master.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			buf := make([]byte, 256)
			n, _ := master.Read(buf)
			if bytes.Contains(buf[:n], []byte("oxs-injected")) {
				t.Errorf("keystrokes reached the terminal: %q", buf[:n])
			}
		})
	}
}
