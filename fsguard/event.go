package fsguard

import (
	"fmt"
	"strings"
	"syscall"
)

// Op is the refused operation.
type Op uint32

// The values are bpf/fs.h's enum fs_op.
const (
	OpOpenWrite    Op = 1
	OpOpenRead     Op = 2
	OpTruncate     Op = 3
	OpUnlink       Op = 4
	OpRmdir        Op = 5
	OpMkdir        Op = 6
	OpMknod        Op = 7
	OpSymlink      Op = 8
	OpLinkSource   Op = 9
	OpLink         Op = 10
	OpRenameSource Op = 11
	OpRenameTarget Op = 12
	OpChmod        Op = 13
	OpChown        Op = 14
	OpSetattr      Op = 15
	OpSetxattr     Op = 16
	OpRemovexattr  Op = 17
	OpBPF          Op = 18 // self-protection: bpf(2)
	OpPtrace       Op = 19 // self-protection: ptrace or /proc/PID access to a task outside
	OpKill         Op = 20 // self-protection: a signal to a task outside
	OpTIOCSTI      Op = 21 // self-protection: terminal input injection
	OpReceive      Op = 22 // a writable fd passed in over SCM_RIGHTS
	OpMount        Op = 23 // self-protection: mount, move_mount, umount, pivot_root
	OpMmap         Op = 24 // a shared writable mapping (mmap, mprotect)
	OpModule       Op = 25 // self-protection: a module autoload request
	OpKernelLoad   Op = 26 // self-protection: a module, firmware, kexec image or policy load
	OpUnixConnect  Op = 27 // connect or send to an AF_UNIX socket (pathname or abstract)
	OpSocket       Op = 28 // self-protection: a socket family the network policy does not cover
	// OpCloneIntoCgroup: self-protection, clone3 with CLONE_INTO_CGROUP (a
	// child started in another cgroup).
	OpCloneIntoCgroup Op = 29
)

var opNames = map[Op]string{
	OpOpenWrite: "open_write", OpOpenRead: "open_read", OpTruncate: "truncate", OpUnlink: "unlink",
	OpRmdir: "rmdir", OpMkdir: "mkdir", OpMknod: "create", OpSymlink: "symlink", OpLinkSource: "link_source",
	OpLink: "link", OpRenameSource: "rename_source", OpRenameTarget: "rename_target", OpChmod: "chmod",
	OpChown: "chown", OpSetattr: "setattr", OpSetxattr: "setxattr", OpRemovexattr: "removexattr",
	OpBPF: "bpf", OpPtrace: "ptrace", OpKill: "kill", OpTIOCSTI: "tiocsti", OpReceive: "receive_fd", OpMount: "mount",
	OpMmap: "mmap_shared_write", OpModule: "module_request", OpKernelLoad: "kernel_load", OpUnixConnect: "unix_connect",
	OpSocket: "socket", OpCloneIntoCgroup: "clone_into_cgroup",
}

func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", uint32(o))
}

// Kind says what decided a refusal.
type Kind uint32

// The values are bpf/fs.h's enum fs_kind.
const (
	KindOutside   Kind = 0 // no writable root above the entry
	KindWritable  Kind = 1
	KindProtected Kind = 2 // a protected path (existing inode)
	KindDenyRead  Kind = 3 // a secret
	KindPattern   Kind = 4 // a protected pattern below a writable root
	KindDepth     Kind = 5 // the walk hit its bound: refused, fail closed
	KindSelf      Kind = 6 // self-protection: the session reached outside itself
	KindUnix      Kind = 7 // an AF_UNIX socket the policy lists
	KindReadable  Kind = 8 // a readable root (read_access = restricted)
	KindDenyGlob  Kind = 9 // a deny-read name glob matched the entry
	// KindUnixPeer: an abstract AF_UNIX socket created outside the
	// session and the sessions nested below it.
	KindUnixPeer Kind = 10
)

var kindNames = map[Kind]string{
	KindOutside: "outside_writable_roots", KindWritable: "writable_root", KindProtected: "protected_path",
	KindDenyRead: "deny_read", KindPattern: "protected_pattern", KindDepth: "walk_depth_exceeded",
	KindSelf: "self_protection", KindUnix: "allowed_unix_socket", KindReadable: "readable_root",
	KindDenyGlob: "deny_read_glob", KindUnixPeer: "unix_peer_outside_session",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", uint32(k))
}

// Event is one refusal by the filesystem programs.
type Event struct {
	CgroupID uint64
	PID, TID uint32
	// PPID is the caller's parent (its real_parent's tgid) when the
	// kernel refused.
	PPID  uint32
	UID   uint32
	Comm  string
	Op    Op
	Errno syscall.Errno
	// Dev is the refused entry's st_dev as userspace sees it, Ino its
	// inode (0 when the entry did not exist yet: NewEntry).
	Dev, Ino uint64
	NewEntry bool
	// CheckAtEnd marks a record that is no refusal: the session created
	// an entry of a CheckedAtEnd pattern (AddSessionOptions.CheckAtEnd),
	// which the supervisor checks when the session ends. Errno is 0.
	CheckAtEnd bool
	// Path is rebuilt from dentry names: absolute in the supervisor's
	// mount namespace when a mount of the filesystem shows the entry,
	// otherwise relative to the filesystem's root ("fsroot:" prefix);
	// ".../" and the innermost components when PathTruncated. For
	// KindUnixPeer it is the abstract socket's name after an "@", as ss(8)
	// prints it (NUL bytes in the name as "@" too).
	Path          string
	PathTruncated bool
	Kind          Kind
	// Rule names the anchor or pattern that decided, with its source.
	Rule string
	// Depth is how many parent steps the walk took before deciding.
	Depth uint32
	// TargetPID is the task a self-protection refusal (OpPtrace, OpKill)
	// protected.
	TargetPID uint32
	// Family is the address family of an OpSocket refusal.
	Family uint16
	// Suppressed is the session's count of refusals the programs' flood
	// control did not send, as of this event (it only grows).
	Suppressed uint64
}

// componentsLeafFirst splits the event's path buffer ("leaf/parent/.../")
// into components, outermost first.
func componentsLeafFirst(buf []byte) []string {
	s := strings.TrimSuffix(string(buf), "/")
	if s == "" {
		return nil
	}
	parts := strings.Split(s, "/")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return parts
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
