package loader

import (
	"maps"

	"golang.org/x/sys/unix"
)

// roviewCalls: amd64 keeps the calls older than the *at family.
var roviewCalls = func() map[int]roviewCall {
	m := maps.Clone(roviewAtCalls)
	maps.Copy(m, map[int]roviewCall{
		unix.SYS_OPEN:   plainPath(ROViewOpOpen),
		unix.SYS_CREAT:  plainPath(ROViewOpOpen),
		unix.SYS_MKDIR:  plainPath(ROViewOpMkdir),
		unix.SYS_MKNOD:  plainPath(ROViewOpMknod),
		unix.SYS_UNLINK: plainPath(ROViewOpUnlink),
		unix.SYS_RMDIR:  plainPath(ROViewOpRmdir),
		unix.SYS_RENAME: twoPaths(ROViewOpRename),
		// link(old, new) and symlink(target, linkpath): the name created
		// is the second.
		unix.SYS_LINK:      {op: ROViewOpLink, path: 2, path2: 1},
		unix.SYS_SYMLINK:   {op: ROViewOpSymlink, path: 2, path2: 1},
		unix.SYS_CHMOD:     plainPath(ROViewOpChmod),
		unix.SYS_CHOWN:     plainPath(ROViewOpChown),
		unix.SYS_LCHOWN:    plainPath(ROViewOpChown),
		unix.SYS_UTIME:     plainPath(ROViewOpUtimes),
		unix.SYS_UTIMES:    plainPath(ROViewOpUtimes),
		unix.SYS_FUTIMESAT: atPath(ROViewOpUtimes),
	})
	return m
}()
