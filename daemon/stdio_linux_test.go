//go:build linux

package daemon

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunClosesTheCallersStreamsBeforeTheFinalEvent: once the client has
// exited (it exits at the final event, which the daemon sends once it
// closed its copies of the caller's streams), nobody holds the caller's
// stdout any more: a caller that reads its command's
// output to EOF (an agent's tool call does) hears the end with the exit,
// not once the daemon has released the session. Nothing is timed: the
// pipe is read without blocking once the client is gone, and a writer
// left open reads as EAGAIN. (stderr, which carries the run's warnings,
// goes to a file: the daemon closes the three streams together.)
func TestRunClosesTheCallersStreamsBeforeTheFinalEvent(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	for round := range 10 {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(helper, clientArgs("run", w.ws, "true")...)
		cmd.Dir = w.ws
		cmd.Env = []string{"PATH=/usr/bin:/bin", helperSocketEnv + "=" + w.socket}
		cmd.Stdout, cmd.Stderr = pw, stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credentialFor(nobody)}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		stderr.Close()
		if err := cmd.Wait(); err != nil {
			msg, _ := os.ReadFile(stderr.Name())
			t.Fatalf("round %d: client: %v\n%s", round, err, msg)
		}
		if err := unix.SetNonblock(int(pr.Fd()), true); err != nil {
			t.Fatal(err)
		}
		var buf [512]byte
		n, err := unix.Read(int(pr.Fd()), buf[:])
		pr.Close()
		switch {
		case errors.Is(err, unix.EAGAIN):
			t.Fatalf("round %d: the caller's stdout still has a writer once the client has exited (the daemon's copy)", round)
		case err != nil:
			t.Fatalf("round %d: read the caller's stdout: %v", round, err)
		case n != 0:
			t.Fatalf("round %d: unexpected output %q", round, buf[:n])
		}
	}
}
