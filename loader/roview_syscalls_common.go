//go:build linux && (amd64 || arm64)

package loader

import "golang.org/x/sys/unix"

// roviewAtCalls are the system calls both architectures have.
var roviewAtCalls = map[int]roviewCall{
	unix.SYS_OPENAT:    atPath(ROViewOpOpen),
	unix.SYS_OPENAT2:   atPath(ROViewOpOpen),
	unix.SYS_MKDIRAT:   atPath(ROViewOpMkdir),
	unix.SYS_MKNODAT:   atPath(ROViewOpMknod),
	unix.SYS_UNLINKAT:  atPath(ROViewOpUnlink),
	unix.SYS_RENAMEAT:  twoAtPaths(ROViewOpRename),
	unix.SYS_RENAMEAT2: twoAtPaths(ROViewOpRename),
	// linkat(olddirfd, old, newdirfd, new): the name created is new.
	unix.SYS_LINKAT: {op: ROViewOpLink, dirfd: 3, path: 4, dirfd2: 1, path2: 2},
	// symlinkat(target, newdirfd, linkpath): target is content, not a file.
	unix.SYS_SYMLINKAT:     {op: ROViewOpSymlink, dirfd: 2, path: 3, path2: 1},
	unix.SYS_FCHMODAT:      atPath(ROViewOpChmod),
	unix.SYS_FCHMODAT2:     atPath(ROViewOpChmod),
	unix.SYS_FCHOWNAT:      atPath(ROViewOpChown),
	unix.SYS_UTIMENSAT:     atPath(ROViewOpUtimes),
	unix.SYS_TRUNCATE:      plainPath(ROViewOpTruncate),
	unix.SYS_SETXATTR:      plainPath(ROViewOpSetxattr),
	unix.SYS_LSETXATTR:     plainPath(ROViewOpSetxattr),
	unix.SYS_SETXATTRAT:    atPath(ROViewOpSetxattr),
	unix.SYS_REMOVEXATTR:   plainPath(ROViewOpRemovexattr),
	unix.SYS_LREMOVEXATTR:  plainPath(ROViewOpRemovexattr),
	unix.SYS_REMOVEXATTRAT: atPath(ROViewOpRemovexattr),
	unix.SYS_FCHMOD:        fdOnly(ROViewOpChmod),
	unix.SYS_FCHOWN:        fdOnly(ROViewOpChown),
	unix.SYS_FTRUNCATE:     fdOnly(ROViewOpTruncate),
	unix.SYS_FSETXATTR:     fdOnly(ROViewOpSetxattr),
	unix.SYS_FREMOVEXATTR:  fdOnly(ROViewOpRemovexattr),
}
