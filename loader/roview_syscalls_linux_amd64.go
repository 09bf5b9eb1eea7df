package loader

import (
	"maps"

	"golang.org/x/sys/unix"
)

// roviewCalls: amd64 keeps the calls older than the *at family.
var roviewCalls = func() map[int]roviewCall {
	m := maps.Clone(roviewAtCalls)
	maps.Copy(m, map[int]roviewCall{
		unix.SYS_OPEN:   plainPath("open", ROViewOpOpen),
		unix.SYS_CREAT:  plainPath("creat", ROViewOpOpen),
		unix.SYS_MKDIR:  plainPath("mkdir", ROViewOpMkdir),
		unix.SYS_MKNOD:  plainPath("mknod", ROViewOpMknod),
		unix.SYS_UNLINK: plainPath("unlink", ROViewOpUnlink),
		unix.SYS_RMDIR:  plainPath("rmdir", ROViewOpRmdir),
		unix.SYS_RENAME: twoPaths("rename", ROViewOpRename),
		// link(old, new) and symlink(target, linkpath): the name created
		// is the second.
		unix.SYS_LINK:      {name: "link", op: ROViewOpLink, path: 2, path2: 1},
		unix.SYS_SYMLINK:   {name: "symlink", op: ROViewOpSymlink, path: 2, path2: 1},
		unix.SYS_ACCESS:    plainPath("access", ROViewOpQuery),
		unix.SYS_CHMOD:     plainPath("chmod", ROViewOpChmod),
		unix.SYS_CHOWN:     plainPath("chown", ROViewOpChown),
		unix.SYS_LCHOWN:    plainPath("lchown", ROViewOpChown),
		unix.SYS_UTIME:     plainPath("utime", ROViewOpUtimes),
		unix.SYS_UTIMES:    plainPath("utimes", ROViewOpUtimes),
		unix.SYS_FUTIMESAT: atPath("futimesat", ROViewOpUtimes),
	})
	return m
}()
