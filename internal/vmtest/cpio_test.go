package vmtest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCpioReadByBusybox checks the archive with an independent reader.
func TestCpioReadByBusybox(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skipf("SKIPPED, NOT PASSED: busybox not installed, cannot cross-check the cpio writer: %v", err)
	}
	var buf bytes.Buffer
	c := &cpioWriter{w: &buf}
	c.Dir("bin", 0o755)
	c.File("bin/hello", 0o755, []byte("hello, odd length"))
	c.Symlink("bin/link", "hello")
	c.File("empty", 0o644, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(busybox, "cpio", "-i", "-d")
	cmd.Dir = dir
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("busybox cpio -i: %v: %s", err, out)
	}
	data, err := os.ReadFile(dir + "/bin/hello")
	if err != nil || string(data) != "hello, odd length" {
		t.Fatalf("bin/hello = %q, %v", data, err)
	}
	if fi, err := os.Stat(dir + "/bin/hello"); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("bin/hello mode = %v, %v", fi.Mode(), err)
	}
	if target, err := os.Readlink(dir + "/bin/link"); err != nil || target != "hello" {
		t.Fatalf("bin/link -> %q, %v", target, err)
	}
	if fi, err := os.Stat(dir + "/empty"); err != nil || fi.Size() != 0 {
		t.Fatalf("empty: %v, %v", fi, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("extracted %s, want bin and empty only", strings.Join(names, ","))
	}
}

func TestCpioIsDeterministic(t *testing.T) {
	build := func() []byte {
		var buf bytes.Buffer
		c := &cpioWriter{w: &buf}
		c.Dir("d", 0o755)
		c.File("d/f", 0o644, []byte("x"))
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	if !bytes.Equal(build(), build()) {
		t.Fatal("same entries produced different archives")
	}
}
