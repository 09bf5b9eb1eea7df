package vmtest

import (
	"fmt"
	"io"
)

// cpioWriter writes the "newc" cpio format the kernel unpacks as an
// initramfs. Only what an initramfs needs: directories, regular files and
// symlinks, all owned by root, with fixed timestamps so that the same
// inputs always produce the same bytes.
type cpioWriter struct {
	w     io.Writer
	ino   uint32
	err   error
	total int64
}

const (
	cpioModeDir     = 0o040000
	cpioModeFile    = 0o100000
	cpioModeSymlink = 0o120000
)

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.total += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if rem := c.total % 4; rem != 0 {
		c.write(make([]byte, 4-rem))
	}
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) {
	c.ino++
	nlink := uint32(1)
	if mode&0o170000 == cpioModeDir {
		nlink = 2
	}
	header := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(header))
	c.write(append([]byte(name), 0))
	c.pad()
	c.write(data)
	c.pad()
}

// Dir adds a directory. name has no leading slash.
func (c *cpioWriter) Dir(name string, perm uint32) { c.entry(name, cpioModeDir|perm, nil) }

// File adds a regular file.
func (c *cpioWriter) File(name string, perm uint32, data []byte) {
	c.entry(name, cpioModeFile|perm, data)
}

// Symlink adds a symbolic link pointing at target.
func (c *cpioWriter) Symlink(name, target string) {
	c.entry(name, cpioModeSymlink|0o777, []byte(target))
}

// Close writes the trailer and reports the first write error.
func (c *cpioWriter) Close() error {
	c.entry("TRAILER!!!", 0, nil)
	return c.err
}
