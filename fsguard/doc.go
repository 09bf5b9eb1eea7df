// Package fsguard enforces a session's filesystem rules with BPF-LSM
// (DESIGN §3): it turns a policy.Compiled into the maps of the filesystem
// programs (bpf/fs.c, loaded by loader.LoadFS), adds and removes sessions
// by cgroup id, and decodes the refusals the programs report.
//
// The programs are attached once (Load) and judge only tasks whose cgroup
// was added with AddSession; every other task is never affected. Call
// AddSession before the session's first process enters the cgroup (run),
// or right after moving it in (attach).
//
// Matching is by inode ancestry: each anchor (writable root, protected
// path, denied read) is an (s_dev, inode) pair, and the programs walk the
// target's d_parent chain to the nearest anchor, so bind mounts, chroot,
// mount namespaces, /proc/self/fd and relative paths name the same
// inodes and get the same verdict. Protected patterns run as a
// bit-parallel NFA over component names read upwards, which also covers
// entries that do not exist yet. Renames and new links are judged in
// prefix mode: no end may be any component of a pattern, so `mv .git x`
// cannot carry hooks out of the pattern's reach, nor `mv x .git` bring
// unprotected content in.
//
// Every refusal returns EACCES (EPERM for self-protection) and is one
// Event; failed ring buffer reservations are counted (EventsLost).
//
// Known limits: an anchor must exist to be matched by inode (DenyRead
// entries with Exists=false and DenyReadGlobs are not enforced here);
// ReadAccess restricted is not enforced here; an fd opened for writing
// before attach keeps working (write(2) is not hooked); a file hard
// linked into a writable root before the session started is writable
// through that link unless it is itself a ProtectedPaths anchor; the walk
// stops after FS_MAX_DEPTH (512) levels and refuses. Overlayfs reports
// st_ino of the upper/lower inode for non-directories, which may differ
// from the overlay inode the walk sees: anchors of non-directories on
// overlayfs may not match (directories, the usual anchors, do).
package fsguard
