//go:build linux && (amd64 || arm64)

package loader

import "golang.org/x/sys/unix"

// roviewAtCalls are the system calls both architectures have.
var roviewAtCalls = map[int]roviewCall{
	unix.SYS_OPENAT:    atPath("openat", ROViewOpOpen),
	unix.SYS_OPENAT2:   atPath("openat2", ROViewOpOpen),
	unix.SYS_MKDIRAT:   atPath("mkdirat", ROViewOpMkdir),
	unix.SYS_MKNODAT:   atPath("mknodat", ROViewOpMknod),
	unix.SYS_UNLINKAT:  atPath("unlinkat", ROViewOpUnlink),
	unix.SYS_RENAMEAT:  twoAtPaths("renameat", ROViewOpRename),
	unix.SYS_RENAMEAT2: twoAtPaths("renameat2", ROViewOpRename),
	// linkat(olddirfd, old, newdirfd, new): the name created is new.
	unix.SYS_LINKAT: {name: "linkat", op: ROViewOpLink, dirfd: 3, path: 4, dirfd2: 1, path2: 2},
	// symlinkat(target, newdirfd, linkpath): target is content, not a file.
	unix.SYS_SYMLINKAT:     {name: "symlinkat", op: ROViewOpSymlink, dirfd: 2, path: 3, path2: 1},
	unix.SYS_FCHMODAT:      atPath("fchmodat", ROViewOpChmod),
	unix.SYS_FCHMODAT2:     atPath("fchmodat2", ROViewOpChmod),
	unix.SYS_FCHOWNAT:      atPath("fchownat", ROViewOpChown),
	unix.SYS_UTIMENSAT:     atPath("utimensat", ROViewOpUtimes),
	unix.SYS_TRUNCATE:      plainPath("truncate", ROViewOpTruncate),
	unix.SYS_SETXATTR:      plainPath("setxattr", ROViewOpSetxattr),
	unix.SYS_LSETXATTR:     plainPath("lsetxattr", ROViewOpSetxattr),
	unix.SYS_SETXATTRAT:    atPath("setxattrat", ROViewOpSetxattr),
	unix.SYS_REMOVEXATTR:   plainPath("removexattr", ROViewOpRemovexattr),
	unix.SYS_LREMOVEXATTR:  plainPath("lremovexattr", ROViewOpRemovexattr),
	unix.SYS_REMOVEXATTRAT: atPath("removexattrat", ROViewOpRemovexattr),
	unix.SYS_FCHMOD:        fdOnly("fchmod", ROViewOpChmod),
	unix.SYS_FCHOWN:        fdOnly("fchown", ROViewOpChown),
	unix.SYS_FTRUNCATE:     fdOnly("ftruncate", ROViewOpTruncate),
	unix.SYS_FSETXATTR:     fdOnly("fsetxattr", ROViewOpSetxattr),
	unix.SYS_FACCESSAT:     atPath("faccessat", ROViewOpQuery),
	unix.SYS_FACCESSAT2:    atPath("faccessat2", ROViewOpQuery),
	unix.SYS_FREMOVEXATTR:  fdOnly("fremovexattr", ROViewOpRemovexattr),
}
