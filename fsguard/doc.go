// Package fsguard enforces a session's filesystem rules with BPF-LSM
// (DESIGN §3): it turns a policy.Compiled into the maps of the BPF-LSM
// programs (bpf/fs.c, self.c, netfamily.c, unix.c, loaded by
// loader.LoadFS), adds and removes sessions by cgroup id, and decodes the
// refusals the programs report.
//
// The programs are attached once (Load) and judge only tasks whose cgroup
// was added with AddSession; every other task is never affected. Call
// AddSession before the session's first process enters the cgroup (run),
// or right after moving it in (attach).
//
// Matching is by inode ancestry: each anchor (writable root, readable
// root, protected path, denied read, allowed AF_UNIX socket) is an
// (s_dev, inode) pair as the kernel itself names the inode (read back
// through a task_file iterator, bpf/anchor.c, since stat(2) reports other
// numbers on overlayfs and btrfs), and the programs walk the target's
// d_parent chain to the nearest anchor, so bind mounts, chroot, mount
// namespaces, /proc/self/fd and relative paths name the same inodes and
// get the same verdict. Protected patterns run as a bit-parallel NFA over
// component names read upwards, which also covers entries that do not
// exist yet; deny-read globs (.env* but not .env.example) match the
// entry's own name, below a scope directory found on the same walk.
// Renames and new links are judged in prefix mode: no end may be any
// component of a pattern, so `mv .git x` cannot carry hooks out of the
// pattern's reach, nor `mv x .git` bring unprotected content in; nor may a
// glob-matched entry be renamed or linked to a name the glob misses.
//
// Besides opens, every way of changing a file is hooked (see bpf/fs.c):
// truncate, create, link, unlink, rename, chmod, chown, setattr, xattrs,
// shared writable mappings (mmap, mprotect: an fd from before the
// session), writable fds received over SCM_RIGHTS, and connecting to a
// pathname AF_UNIX socket, which counts as writing it unless the policy
// lists the socket. Self-protection (bpf/self.c) refuses bpf(2), ptrace
// and signals to tasks outside the session, TIOCSTI, mounts, module
// requests, kernel loads of modules, firmware and kexec images, and
// clone3 with CLONE_INTO_CGROUP (a child started in another cgroup); where
// the network policy is not full, socket(2) of families other than
// AF_INET, AF_INET6, AF_UNIX and AF_NETLINK is refused (bpf/netfamily.c).
// An abstract AF_UNIX socket (no inode) may be connected or sent to only
// when it was created in the session or in a session nested below it, in
// every network mode (bpf/unix.c, KindUnixPeer; the path is "@" and the
// name).
//
// One kind of protected entry may be created: a file of a CheckedAtEnd
// pattern (git's .git files, a new worktree's commondir), for a session
// added with SessionOptions.CheckAtEnd. Its creation (path_mknod of a
// regular file) is reported as an Event with CheckAtEnd set, the open
// that created it may write it, and no later open may; a creation the
// programs cannot report (ring buffer full, path too long to rebuild) is
// refused. The caller checks each at the session's end (package
// quarantine).
//
// Every refusal returns EACCES (EPERM for self-protection and abstract
// sockets, as Landlock's scoping does) and is one
// record in the ring buffer all programs share (package audit/bpfring,
// which counts failed reservations and keeps the flood control); Decode
// turns a record into an Event.
//
// Known limits: an anchor must exist to be matched by inode (DenyRead
// entries with Exists=false are not enforced here); an fd opened for
// writing before attach keeps working through write(2), which is not
// hooked (mapping it is refused); a file hard linked into a writable root
// before the session started is writable through that link unless it is
// itself a ProtectedPaths anchor; the walk ends at a filesystem's root, so
// a filesystem mounted below a writable root is not writable (readable
// roots do extend to filesystems mounted below them when the session is
// added); the walk stops after FS_MAX_DEPTH (512) levels and refuses;
// anchors on overlayfs are refused (ErrOverlay): overlayfs writes its
// upper layer on the session's behalf, where no anchor is an ancestor, and
// its inode numbers repeat across layers on different filesystems; so are
// anchors on btrfs and bcachefs, whose inode numbers repeat across
// subvolumes (ErrSubvolumes) — Landlock covers both. Memfds and shared anonymous memory are not judged: no mount
// shows them.
package fsguard
