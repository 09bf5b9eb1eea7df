//go:build linux

package loader

import "fmt"

// ROViewOp is the operation of a system call the read-only view refuses,
// as ROViewTable numbers it for bpf/roview.c (roview_syscall.op), which
// copies it into the event. 0 is a system call not in the table.
type ROViewOp uint8

// The operations, named after the audit schema's event.action vocabulary
// (docs/audit-schema.md).
const (
	ROViewOpUnknown ROViewOp = iota
	ROViewOpOpen
	ROViewOpMkdir
	ROViewOpMknod
	ROViewOpUnlink
	ROViewOpRmdir
	ROViewOpRename
	ROViewOpLink
	ROViewOpSymlink
	ROViewOpChmod
	ROViewOpChown
	ROViewOpUtimes
	ROViewOpTruncate
	ROViewOpSetxattr
	ROViewOpRemovexattr
	// ROViewOpQuery is a call that only asks (access(2) with W_OK): its
	// EROFS is an answer, not a refusal, and the program reports nothing
	// (ROVIEW_OP_QUERY in bpf/roview.c).
	ROViewOpQuery ROViewOp = 255
)

var roviewOpNames = [...]string{
	ROViewOpUnknown: "syscall", ROViewOpOpen: "open", ROViewOpMkdir: "mkdir", ROViewOpMknod: "mknod",
	ROViewOpUnlink: "unlink", ROViewOpRmdir: "rmdir", ROViewOpRename: "rename", ROViewOpLink: "link",
	ROViewOpSymlink: "symlink", ROViewOpChmod: "chmod", ROViewOpChown: "chown", ROViewOpUtimes: "utimes",
	ROViewOpTruncate: "truncate", ROViewOpSetxattr: "setxattr", ROViewOpRemovexattr: "removexattr",
}

func (o ROViewOp) String() string {
	if o == ROViewOpQuery {
		return "query"
	}
	if int(o) < len(roviewOpNames) {
		return roviewOpNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// roviewCall describes one system call: its operation and the 1-based
// positions of its arguments (0: none).
type roviewCall struct {
	name                           string
	op                             ROViewOp
	path, dirfd, path2, dirfd2, fd uint8
}

// The shapes the system calls share.
var (
	// openat, mkdirat, fchmodat, ...
	atPath = func(name string, op ROViewOp) roviewCall { return roviewCall{name: name, op: op, dirfd: 1, path: 2} }
	// open, mkdir, chmod, ...
	plainPath = func(name string, op ROViewOp) roviewCall { return roviewCall{name: name, op: op, path: 1} }
	// fchmod, fchown, ...
	fdOnly = func(name string, op ROViewOp) roviewCall { return roviewCall{name: name, op: op, fd: 1} }
	// rename
	twoPaths = func(name string, op ROViewOp) roviewCall { return roviewCall{name: name, op: op, path: 1, path2: 2} }
	// renameat, renameat2
	twoAtPaths = func(name string, op ROViewOp) roviewCall {
		return roviewCall{name: name, op: op, dirfd: 1, path: 2, dirfd2: 3, path2: 4}
	}
)

// ROViewCall is one entry of ROViewTable.
type ROViewCall struct {
	Name    string // the system call's name (openat)
	Op      ROViewOp
	Syscall ROViewSyscall
}

// ROViewTable is the system call table of this architecture, by number
// (roview_syscalls): which operation each call is and which of its
// arguments name the file. A refusal of a call not listed is reported
// without a path.
func ROViewTable() map[int]ROViewCall {
	out := make(map[int]ROViewCall, len(roviewCalls))
	for nr, c := range roviewCalls {
		out[nr] = ROViewCall{Name: c.name, Op: c.op, Syscall: ROViewSyscall{Op: uint8(c.op), Path: c.path, Dirfd: c.dirfd,
			Path2: c.path2, Dirfd2: c.dirfd2, Fd: c.fd}}
	}
	return out
}
