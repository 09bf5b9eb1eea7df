//go:build linux

package session_test

import (
	"testing"

	"github.com/openoxide/oxsupervise/internal/escapetest"
)

// TestEscape runs the escape table (package escapetest: metadata outside
// the writable roots, a root session's capabilities, socket families,
// protected names created during the session, unix sockets outside it,
// /dev/shm, a symlink at a protected name, the user's build caches)
// inside `oxsupervise run` on the path this kernel gives: the Landlock
// path where BPF-LSM is not usable. session/fsvmtest runs the same table
// on the BPF-LSM path in the kernel-test VM.
func TestEscape(t *testing.T) {
	requireRoot(t)
	self := selfExe(t)
	escapetest.Run(t, escapetest.Config{CLI: bin, Self: self})
}
