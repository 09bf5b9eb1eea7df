/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * fs.h: the data shared between the BPF-LSM programs (fs.c, self.c,
 * netfamily.c, unix.c) and userspace (package fsguard). Every struct here is mirrored by a Go type
 * that bpf2go generates, so fields are laid out without implicit padding.
 */
#ifndef OXS_FS_H
#define OXS_FS_H

#include "common.h"
#include "events.h"

/*
 * Protected patterns run as a bit-parallel NFA over path components, read
 * from the entry upwards: every (pattern, component) pair owns one bit, the
 * pattern's last component the lowest. FS_NFA_WORDS * 64 bounds the total
 * number of components of a session's patterns.
 */
#define FS_NFA_WORDS 4
/* Component names longer than this can never be a protected name. */
#define FS_NAME_LEN 64
/* Bound of the d_parent walk; a deeper entry is refused (fail closed). */
#define FS_MAX_DEPTH 512
/* Room for the path rebuilt into an event, in bytes. */
#define FS_PATH_LEN 1024
/* How many components the event path holds at most. */
#define FS_PATH_COMPONENTS 64

/* What an anchor means (fs_rule.kind), and why an event was refused. */
enum fs_kind {
	FS_KIND_NONE = 0,      /* no anchor: outside every writable root */
	FS_KIND_WRITABLE = 1,  /* writable root */
	FS_KIND_PROTECTED = 2, /* protected path: read-only, even below a root */
	FS_KIND_DENY_READ = 3, /* secret: neither read nor written */
	FS_KIND_PATTERN = 4,   /* a protected pattern matched below a root */
	FS_KIND_DEPTH = 5,     /* the walk hit FS_MAX_DEPTH */
	FS_KIND_SELF = 6,      /* self-protection: reaching out of the session */
	FS_KIND_UNIX = 7,      /* an AF_UNIX socket the session may connect to */
	FS_KIND_READABLE = 8,  /* readable root (read_access = restricted) */
	FS_KIND_DENY_GLOB = 9, /* a deny-read name glob matched the entry */
	FS_KIND_UNIX_PEER = 10, /* an abstract AF_UNIX socket created outside the session */
};

/* The refused operation (fs_event.op). */
enum fs_op {
	FS_OP_OPEN_WRITE = 1,
	FS_OP_OPEN_READ = 2,
	FS_OP_TRUNCATE = 3,
	FS_OP_UNLINK = 4,
	FS_OP_RMDIR = 5,
	FS_OP_MKDIR = 6,
	FS_OP_MKNOD = 7,
	FS_OP_SYMLINK = 8,
	FS_OP_LINK_SOURCE = 9,
	FS_OP_LINK = 10,
	FS_OP_RENAME_SOURCE = 11,
	FS_OP_RENAME_TARGET = 12,
	FS_OP_CHMOD = 13,
	FS_OP_CHOWN = 14,
	FS_OP_SETATTR = 15,
	FS_OP_SETXATTR = 16,
	FS_OP_REMOVEXATTR = 17,
	FS_OP_BPF = 18,     /* bpf(2) */
	FS_OP_PTRACE = 19,  /* ptrace, /proc/PID/{mem,environ,...} of a task outside */
	FS_OP_KILL = 20,    /* a signal to a task outside */
	FS_OP_TIOCSTI = 21, /* terminal input injection */
	FS_OP_RECEIVE = 22, /* a writable fd passed in over SCM_RIGHTS */
	FS_OP_MOUNT = 23,   /* mount, move_mount, umount, pivot_root */
	FS_OP_MMAP = 24,    /* a shared writable mapping (mmap, mprotect) */
	FS_OP_MODULE = 25,  /* a module autoload request */
	FS_OP_KERNEL_LOAD = 26, /* a module, firmware, kexec image or policy read by the kernel */
	FS_OP_UNIX_CONNECT = 27, /* connect/send to an AF_UNIX socket (pathname or abstract) */
	FS_OP_SOCKET = 28,  /* a socket of a family the network policy does not cover */
	FS_OP_CLONE_INTO_CGROUP = 29, /* clone3 with CLONE_INTO_CGROUP: a child in another cgroup */
};

/* fs_event.flags */
#define FS_EVENT_PATH_TRUNCATED (1U << 0) /* path lost its leading components */
#define FS_EVENT_NEW_ENTRY (1U << 1)      /* the entry did not exist yet */
#define FS_EVENT_ABSTRACT (1U << 2)       /* path holds an abstract socket name, raw */
#define FS_EVENT_CHECK_AT_END (1U << 3)   /* not a refusal: a creation let through, checked at the session's end */

/*
 * Deny-read name globs: a name is matched against at most FS_GLOBS globs
 * of the form PREFIX, PREFIX*, *SUFFIX or PREFIX*SUFFIX, each part at most
 * FS_GLOB_LEN bytes.
 */
#define FS_GLOBS 8
#define FS_GLOB_LEN 32

struct fs_glob {
	char prefix[FS_GLOB_LEN];
	char suffix[FS_GLOB_LEN]; /* right-aligned: suffix[FS_GLOB_LEN - suffix_len:] */
	__u8 prefix_len;
	__u8 suffix_len;
	__u8 star;       /* 0: the name is exactly the prefix */
	__u8 exclude_of; /* 0: an include glob; k + 1: an exception to include glob k */
	__u32 _pad;
};

/* fs_session.flags */
#define FS_SESSION_RESTRICTED_READ (1U << 0) /* reads only below readable and writable roots */
#define FS_SESSION_INET_ONLY (1U << 1)       /* sockets of AF_UNIX, AF_INET, AF_INET6, AF_NETLINK only */

/* fs_sessions value: one per session cgroup id. */
struct fs_session {
	__u64 start[FS_NFA_WORDS];     /* a pattern's last component */
	__u64 final[FS_NFA_WORDS];     /* a pattern's first component: a match */
	__u64 wildcard[FS_NFA_WORDS];  /* "*" components */
	__u64 dir_only[FS_NFA_WORDS];  /* start bits of dir-only patterns */
	__u64 file_only[FS_NFA_WORDS]; /* start bits of file-only patterns */
	/*
	 * Final bits of the file patterns a session may create an entry of,
	 * reported (FS_EVENT_CHECK_AT_END) for the check at its end: git's
	 * .git files and worktree commondirs. Zero for a session whose
	 * supervisor makes no such check.
	 */
	__u64 checked_at_end[FS_NFA_WORDS];
	/*
	 * Always 0. The NFA state starts from it instead of a literal 0: the
	 * 6.1 verifier simulates a bpf_loop callback once, starting from the
	 * caller's stack, so with a constant initial state it would see
	 * "no pattern matched" as the only outcome and drop the refusal.
	 */
	__u64 zero;
	__u32 flags; /* FS_SESSION_* */
	__u32 nglobs;
	struct fs_glob globs[FS_GLOBS];
};

/* fs_anchors key. dev is the kernel's s_dev (major << 20 | minor). */
struct fs_anchor_key {
	__u64 cgroup_id;
	__u64 ino;
	__u32 dev;
	__u32 _pad;
};

struct fs_rule {
	__u32 kind; /* enum fs_kind */
	__u32 id;   /* userspace's index of the anchor, echoed in events */
};

/* fs_names key: a component name, zero padded. */
struct fs_name_key {
	__u64 cgroup_id;
	char name[FS_NAME_LEN];
};

/* fs_names value: the NFA bits the name stands for. */
struct fs_name_bits {
	__u64 bits[FS_NFA_WORDS];
};

/* One refusal, sent to the shared ring buffer (events.h). */
struct fs_event {
	struct oxs_event_header hdr; /* source OXS_SOURCE_FS */
	__u64 ino;     /* the refused entry, 0 for one that did not exist */
	__u64 matched[FS_NFA_WORDS]; /* FS_KIND_PATTERN: the final bits hit */
	__u32 dev;     /* kernel s_dev of the refused entry's filesystem */
	__u32 pid;     /* tgid */
	__u32 tid;
	__u32 uid;
	__u32 op;      /* enum fs_op */
	__s32 errno_;  /* positive errno returned to the caller */
	__u32 kind;    /* enum fs_kind: what decided */
	__u32 rule_id; /* fs_rule.id of the deciding anchor */
	__u32 depth;   /* how many levels the walk went up */
	__u32 flags;   /* FS_EVENT_* */
	__u16 path_off; /* path[0:path_off] holds the names, leaf first */
	__u16 family;   /* FS_OP_SOCKET: the address family refused */
	__u32 target_pid; /* FS_OP_PTRACE, FS_OP_KILL: the task reached for */
	__u32 ppid;    /* tgid of the caller's parent (real_parent) */
	__u32 _pad;
	char comm[16];
	char path[FS_PATH_LEN];
};

#endif /* OXS_FS_H */
