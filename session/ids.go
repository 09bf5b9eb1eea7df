package session

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
)

// NewID returns a fresh session id.
func NewID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return "s-" + hex.EncodeToString(b[:]), nil
}

// ExitStatus turns the result of exec.Cmd.Wait into the shell's
// convention, which `run` promises to its callers: the command's own status,
// or 128+N when signal N killed it. ok is false when err says nothing about
// how the command ended (it never started, or waiting failed).
func ExitStatus(err error) (code int, ok bool) {
	if err == nil {
		return 0, true
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	if ws, isWait := ee.Sys().(syscall.WaitStatus); isWait && ws.Signaled() {
		return 128 + int(ws.Signal()), true
	}
	return ee.ExitCode(), true
}
