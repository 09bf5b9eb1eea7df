//go:build linux

package testutil

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TmpfsBase returns a new directory below /var/tmp with a tmpfs of its own
// mounted on it, both gone after the test. Not below /tmp or $TMPDIR,
// which are writable roots of every session; a tmpfs because the test
// VM's root is an overlayfs, where BPF-LSM refuses anchors (inode numbers
// there need not be what the kernel's walk sees).
func TmpfsBase(t testing.TB, prefix string) string {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := unix.Mount("tmpfs", base, "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", base, err)
	}
	t.Cleanup(func() { unix.Unmount(base, unix.MNT_DETACH) })
	return base
}
