// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * fs.c: BPF-LSM filesystem enforcement for sessions (DESIGN §3).
 *
 * Every program looks the caller's cgroup up in fs_sessions (session.h); a
 * task in no session is never affected. For a task in a session the target
 * entry is judged by inode ancestry, never by path strings: the walk goes
 * up d_parent from the entry and, at each level, looks the inode up in
 * fs_anchors ({session, s_dev, ino} -> writable root / protected / secret)
 * and feeds the component name to the protected-pattern NFA. The nearest
 * anchor decides. Aliases (bind mounts, chroot, mount namespaces, relative
 * paths, /proc/self/fd) do not change a dentry's parents, so they do not
 * change the verdict. A walk that runs out of steps refuses.
 *
 * Self-protection and the kernel's own interfaces are in self.c, socket
 * families (the network policy's) in netfamily.c, abstract AF_UNIX peers
 * (which have no inode) in unix.c; the four objects share fs_sessions and
 * the event maps.
 *
 * Hooks (each refuses with EACCES and an FS_OP_* event):
 *   lsm/file_open            opening for writing or truncating, and for
 *                            reading where reads are restricted, secret or
 *                            a deny-read glob matches
 *   lsm/file_receive         a writable fd received over SCM_RIGHTS, as an open
 *   lsm/mmap_file            a shared writable mapping of a file
 *   lsm/file_mprotect        PROT_WRITE added to a shared file mapping
 *   lsm/unix_stream_connect  connect(2) to a pathname AF_UNIX stream socket
 *   lsm/unix_may_send        connect(2)/sendto(2) to a pathname datagram socket
 *   lsm/file_truncate        ftruncate(2), 6.2+ (optional: path_truncate
 *                            covers it on older kernels)
 *   lsm/path_truncate        truncate(2), and ftruncate(2) before 6.2
 *   lsm/path_unlink          removing a name
 *   lsm/path_rmdir           removing a directory
 *   lsm/path_mkdir           creating a directory
 *   lsm/path_mknod           creating a file or device (also open(O_CREAT));
 *                            a regular file of a CheckedAtEnd pattern (git's
 *                            .git files, worktree commondirs) is let through
 *                            and reported instead (FS_EVENT_CHECK_AT_END)
 *   lsm/path_symlink         creating a symlink (no part of a pattern)
 *   lsm/path_link            a hard link: its source and its new name
 *   lsm/path_rename          both ends of a rename or exchange
 *   lsm/path_chmod           chmod(2)
 *   lsm/path_chown           chown(2)
 *   lsm/inode_setattr        what no path hook sees (utimes); one of two
 *                            variants is loaded, by the kernel's signature
 *   lsm/inode_setxattr       setting an extended attribute
 *   lsm/inode_removexattr    removing an extended attribute
 */
#include "common.h"
#include "fs.h"
#include "session.h"

char __license[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct fs_anchor_key);
	__type(value, struct fs_rule);
} fs_anchors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct fs_name_key);
	__type(value, struct fs_name_bits);
} fs_names SEC(".maps");

/*
 * fs_glob_scopes value: the include globs (bit k = fs_session.globs[k])
 * that apply below the directory {session, s_dev, ino}.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct fs_anchor_key);
	__type(value, __u32);
} fs_glob_scopes SEC(".maps");

/* Keep the event type in the BTF for bpf2go. */
const struct fs_event *unused_fs_event __attribute__((unused));

struct super_block___fs {
	unsigned long s_flags;
	unsigned long s_magic;
} __attribute__((preserve_access_index));

/* i_rdev is not in common.h; the ___fs flavour is stripped by CO-RE. */
struct inode___fs {
	dev_t i_rdev;
	umode_t i_mode;
} __attribute__((preserve_access_index));

#define S_IFMT 00170000
#define S_IFDIR 0040000
#define S_IFREG 0100000
#define S_IFBLK 0060000
#define S_IFCHR 0020000
#define RENAME_EXCHANGE (1 << 1)

/* check() flags */
#define CHECK_READ (1U << 0)      /* a read: only secrets refuse */
#define CHECK_ENTRY (1U << 1)     /* the entry itself is added, removed or moved */
#define CHECK_PREFIX (1U << 2)    /* the entry may not be any part of a pattern */
#define CHECK_LEAF_DIR (1U << 3)  /* the entry is (or becomes) a directory */
#define CHECK_LEAF_FILE (1U << 4) /* the entry is (or becomes) a non-directory */
#define CHECK_UNIX (1U << 5)      /* a connect or send to the AF_UNIX socket entry */
#define CHECK_GLOB (1U << 6)      /* the entry's content is read: deny-read globs apply */
#define CHECK_CREATE (1U << 7)    /* a new regular file: checked_at_end patterns let through, reported */
#define CHECK_CREATED (1U << 8)   /* the open that created the file: checked_at_end patterns let through */

/*
 * f_mode of an open that created its file (include/linux/fs.h): 0x100000
 * from 4.19 through 6.12 at least; both kernels of the VM tests prove it.
 */
#define FMODE_CREATED ((fmode_t)0x100000)

struct walk {
	__u64 dentry; /* current level; a kernel pointer read only through CO-RE */
	__u64 cgroup_id;
	__u64 state[FS_NFA_WORDS];
	__u64 hit[FS_NFA_WORDS];
	__u64 start[FS_NFA_WORDS];
	__u64 start_dir[FS_NFA_WORDS];
	__u64 start_file[FS_NFA_WORDS];
	__u64 final[FS_NFA_WORDS];
	__u64 wildcard[FS_NFA_WORDS];
	__u32 flags;
	__u32 kind;
	__u32 rule_id;
	__u32 depth;
	__u32 decided;
	__u32 glob_want; /* include globs the leaf name matched */
	__u32 glob_hit;  /* of those, the ones whose scope is an ancestor */
	__u32 zero;      /* fs_session.zero: 0, not a constant to the verifier */
};

static long walk_step(__u32 level, struct walk *w)
{
	struct dentry *d = (struct dentry *)w->dentry;
	struct inode *inode = BPF_CORE_READ(d, d_inode);

	if (inode) {
		struct fs_anchor_key key = {
			.cgroup_id = w->cgroup_id,
			.ino = BPF_CORE_READ(inode, i_ino),
			.dev = BPF_CORE_READ(d, d_sb, s_dev),
		};
		if (w->glob_want) {
			__u32 *scoped = bpf_map_lookup_elem(&fs_glob_scopes, &key);
			if (scoped)
				w->glob_hit |= *scoped & w->glob_want;
		}
		struct fs_rule *rule = bpf_map_lookup_elem(&fs_anchors, &key);
		/* Adding, removing or moving a writable root itself changes
		 * its parent, which the root does not make writable. */
		if (rule && !(level == 0 && (w->flags & CHECK_ENTRY) && rule->kind == FS_KIND_WRITABLE)) {
			w->kind = rule->kind;
			w->rule_id = rule->id;
			w->depth = level;
			w->decided = 1;
			return 1;
		}
	}

	struct fs_name_key nkey = {};
	struct fs_name_bits *bits = NULL;
	struct qstr q = BPF_CORE_READ(d, d_name);
	if (q.len < FS_NAME_LEN) {
		nkey.cgroup_id = w->cgroup_id;
		bpf_probe_read_kernel(nkey.name, q.len & (FS_NAME_LEN - 1), q.name);
		bits = bpf_map_lookup_elem(&fs_names, &nkey);
	}

	__u64 carry = 0;
	for (int k = 0; k < FS_NFA_WORDS; k++) {
		__u64 allowed = w->wildcard[k];
		if (bits)
			allowed |= bits->bits[k];
		__u64 s;
		if (level == 0) {
			__u64 start = w->start[k];
			if (w->flags & CHECK_PREFIX)
				start = ~0ULL;
			else if (w->flags & CHECK_LEAF_DIR)
				start = w->start_dir[k];
			else if (w->flags & CHECK_LEAF_FILE)
				start = w->start_file[k];
			s = allowed & start;
		} else {
			__u64 old = w->state[k];
			__u64 shifted = (old << 1) | carry;
			carry = old >> 63;
			s = (shifted & ~w->start[k] & allowed) | (allowed & w->start_dir[k]);
		}
		w->state[k] = s;
		w->hit[k] |= s & w->final[k];
	}

	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	if (!parent || parent == d) {
		/* The filesystem's root and no anchor on the way. */
		w->kind = FS_KIND_NONE;
		w->depth = level;
		w->decided = 1;
		return 1;
	}
	w->dentry = (__u64)parent;
	return 0;
}

/*
 * The state of the path an event carries, built by path_step. pos and n
 * start from walk.zero, not a literal 0: a 6.1 verifier checks a bpf_loop
 * callback once, from the caller's state, so from a constant 0 it would
 * prove the truncation check dead, remove it, and let a long path write
 * past the event (found by the long-names case of TestEnforcement).
 */
struct path_build {
	struct fs_event *e;
	__u64 dentry; /* the entry whose name comes next */
	__u32 pos;    /* bytes of e->path used */
	__u32 n;      /* components added */
};

/*
 * path_step adds one name to the event's path, leaf first and
 * '/'-separated (userspace reverses them). A bpf_loop callback, so the
 * verifier checks one step instead of every iteration of an unrolled
 * loop in every program that emits.
 */
static int path_step(__u32 k, struct path_build *pb)
{
	struct fs_event *e = pb->e;
	struct dentry *d = (struct dentry *)pb->dentry;
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	if (!parent || parent == d)
		return 1;
	__u32 pos = pb->pos;
	if (pos > FS_PATH_LEN - 257) {
		e->flags |= FS_EVENT_PATH_TRUNCATED;
		return 1;
	}
	struct qstr q = BPF_CORE_READ(d, d_name);
	__u32 len = q.len & 255;
	bpf_probe_read_kernel(&e->path[pos], len, q.name);
	pos += len;
	/* Keep clang from folding the mask away: the verifier needs it. */
	asm volatile("" : "+r"(pos));
	pos &= FS_PATH_LEN - 1;
	e->path[pos] = '/';
	pb->pos = pos + 1;
	pb->dentry = (__u64)parent;
	pb->n = k + 1;
	return 0;
}

/*
 * emit reports a refusal (err > 0) or, with err 0, a creation let through
 * for the check at the session's end. It returns 0 when the record was
 * sent, -1 when not: a creation that userspace would not hear of, or
 * could not find by its path, must be refused.
 */
static __noinline int emit(struct walk *w, __u64 leaf, __u32 op, __u32 err)
{
	struct fs_event *e = oxs_event_reserve_limited(w->cgroup_id, OXS_SOURCE_FS, sizeof(*e), err != 0);
	if (!e)
		return -1;
	struct dentry *d = (struct dentry *)leaf;
	struct inode *inode = BPF_CORE_READ(d, d_inode);

	e->ino = inode ? BPF_CORE_READ(inode, i_ino) : 0;
	for (int k = 0; k < FS_NFA_WORDS; k++)
		e->matched[k] = w->kind == FS_KIND_PATTERN || w->kind == FS_KIND_DENY_GLOB ? w->hit[k] : 0;
	e->dev = BPF_CORE_READ(d, d_sb, s_dev);
	OXS_EVENT_CALLER(e);
	e->op = op;
	e->errno_ = err;
	e->kind = w->kind;
	e->rule_id = w->rule_id;
	e->depth = w->depth;
	e->flags = (inode ? 0 : FS_EVENT_NEW_ENTRY) | (err ? 0 : FS_EVENT_CHECK_AT_END);
	/* Ring buffer memory is not zeroed: no field may keep an old record's bytes. */
	e->family = 0;
	e->target_pid = 0;
	e->ppid = current_ppid();
	e->_pad = 0;

	struct path_build pb = {.e = e, .dentry = leaf, .pos = w->zero, .n = w->zero};
	bpf_loop(FS_PATH_COMPONENTS, path_step, &pb, 0);
	if (pb.n == FS_PATH_COMPONENTS)
		e->flags |= FS_EVENT_PATH_TRUNCATED;
	if (!err && (e->flags & FS_EVENT_PATH_TRUNCATED)) {
		bpf_ringbuf_discard(e, 0);
		return -1;
	}
	e->path_off = pb.pos;
	oxs_event_submit(e);
	return 0;
}

/*
 * memfds and shared anonymous memory live on the kernel's own tmpfs (or
 * hugetlbfs) instance, which no mount shows: nobody can name such a file,
 * an fd to one is IPC like a pipe. Only these two: other filesystems
 * mounted by the kernel (sysfs) share their superblock with user mounts.
 */
#define SB_KERNMOUNT (1UL << 22)
#define TMPFS_MAGIC 0x01021994
#define HUGETLBFS_MAGIC 0x958458f6

static __always_inline bool kernel_private(struct dentry *d)
{
	struct super_block___fs *sb = (void *)BPF_CORE_READ(d, d_sb);
	unsigned long magic = BPF_CORE_READ(sb, s_magic);
	return (BPF_CORE_READ(sb, s_flags) & SB_KERNMOUNT) && (magic == TMPFS_MAGIC || magic == HUGETLBFS_MAGIC);
}

/*
 * The glob matcher has no data-dependent branches: a branch per glob
 * would double the verifier's states for each of FS_GLOBS globs. Every
 * comparison is arithmetic on 64-bit values: (s64)x >> 63 is all ones
 * exactly when x < 0.
 */
static __always_inline __u64 neg_mask(__s64 x)
{
	/* In asm so that clang cannot turn it back into a compare-and-branch. */
	asm volatile("%[x] s>>= 63" : [x] "+r"(x));
	return (__u64)x;
}
#define NEG_MASK(x) neg_mask((__s64)(x))

/* glob_match returns 1 when the name matches g, else 0. */
static __always_inline __u64 glob_match(const struct fs_glob *g, const char *head, const char *tail, __u64 len)
{
	__s64 plen = g->prefix_len & 63, slen = g->suffix_len & 63;
	__u64 diff = 0;
	for (int i = 0; i < FS_GLOB_LEN; i++) {
		diff |= (__u64)(__u8)(head[i] ^ g->prefix[i]) & NEG_MASK(i - plen);
		diff |= (__u64)(__u8)(tail[i] ^ g->suffix[i]) & NEG_MASK(FS_GLOB_LEN - 1 - i - slen);
	}
	__u64 star = NEG_MASK(-(__s64)(g->star & 1));   /* all ones when star */
	__u64 longer = ~NEG_MASK((__s64)len - plen - slen); /* len >= plen + slen */
	__u64 equal = NEG_MASK(((__s64)(len ^ plen)) - 1); /* len == plen */
	__u64 same = NEG_MASK((__s64)diff - 1);             /* diff == 0 */
	return ((star & longer) | (~star & equal)) & same & 1;
}

/*
 * leaf_globs returns the include globs of sess that the name of d matches
 * and none of whose exceptions do (bit k = sess->globs[k]); name and len
 * are the entry's d_name. A global function: the verifier checks it once,
 * not at every caller, and only with scalar arguments.
 */
__noinline __u32 leaf_globs(const struct fs_session *sess, __u64 name, __u64 len)
{
	if (!sess)
		return 0;
	__u64 n = sess->nglobs;
	char head[FS_GLOB_LEN] = {}, tail[FS_GLOB_LEN] = {};
	len &= 255;
	bpf_probe_read_kernel(head, FS_GLOB_LEN, (const void *)name);
	/*
	 * tail holds the FS_GLOB_LEN bytes that end the name. A name shorter
	 * than that is stored inline in its dentry, so the bytes around it
	 * are the dentry's own; head's bytes past the name and tail's before
	 * it are never compared, as a glob only matches a name at least as
	 * long as its prefix and suffix.
	 */
	bpf_probe_read_kernel(tail, FS_GLOB_LEN, (const void *)(name + len - FS_GLOB_LEN));
	__u64 include = 0, excluded = 0;
	for (int k = 0; k < FS_GLOBS; k++) {
		const struct fs_glob *g = &sess->globs[k];
		__u64 m = glob_match(g, head, tail, len) & NEG_MASK(k - (__s64)n) & 1; /* k < n */
		__u64 exc = g->exclude_of & (FS_GLOBS + 1);
		__u64 is_exc = NEG_MASK(-(__s64)exc) & 1;
		include |= (m & (is_exc ^ 1)) << k;
		excluded |= (m & is_exc) << ((exc - 1) & (FS_GLOBS - 1));
	}
	return include & ~excluded;
}

/*
 * check judges one entry for the current task and returns 0 or -EACCES,
 * emitting an event for a refusal. dentry is the entry (negative for one
 * that is being created).
 */
static __noinline int check(__u64 dentry, __u32 op, __u32 flags)
{
	__u64 cgroup_id;
	struct fs_session *sess = current_session(&cgroup_id);
	if (!sess || kernel_private((struct dentry *)dentry))
		return 0;

	__u32 sess_flags = sess->flags;
	struct walk w = {
		.dentry = dentry,
		.cgroup_id = cgroup_id,
		.flags = flags,
	};
	/* Not a constant to the verifier; see fs_session.zero. */
	w.zero = sess->zero;
	w.glob_hit = sess->zero;
	if (flags & CHECK_GLOB) {
		struct qstr q = BPF_CORE_READ((struct dentry *)dentry, d_name);
		w.glob_want = leaf_globs(sess, (__u64)q.name, q.len);
	}
	for (int k = 0; k < FS_NFA_WORDS; k++) {
		/* Zero, but not a constant to the verifier; see fs_session.zero. */
		w.state[k] = sess->zero;
		w.hit[k] = sess->zero;
		w.start[k] = sess->start[k];
		w.start_dir[k] = sess->start[k] & ~sess->file_only[k];
		w.start_file[k] = sess->start[k] & ~sess->dir_only[k];
		w.final[k] = sess->final[k];
		w.wildcard[k] = sess->wildcard[k];
	}
	bpf_loop(FS_MAX_DEPTH, walk_step, &w, 0);
	if (!w.decided) {
		w.kind = FS_KIND_DEPTH;
		w.depth = FS_MAX_DEPTH;
	}

	/*
	 * A connect to an AF_UNIX socket counts as a write (the kernel itself
	 * asks for MAY_WRITE on the socket inode), except that a socket the
	 * policy lists may be connected to wherever it is.
	 */
	bool read = flags & CHECK_READ;
	bool restricted = sess_flags & FS_SESSION_RESTRICTED_READ;
	bool refuse, report = false;
	switch (w.kind) {
	case FS_KIND_WRITABLE:
		refuse = false;
		if (!read) {
			__u64 any = 0, rest = 0;
			for (int k = 0; k < FS_NFA_WORDS; k++) {
				any |= w.hit[k];
				rest |= w.hit[k] & ~sess->checked_at_end[k];
			}
			if (any) {
				w.kind = FS_KIND_PATTERN;
				refuse = true;
				/*
				 * Only checked_at_end file patterns hit, and a file
				 * pattern matches the entry itself: a new file git
				 * writes for normal work. It is let through on the
				 * condition that userspace hears of it; the open that
				 * created it may write it, no later one.
				 */
				if (!rest && (flags & (CHECK_CREATE | CHECK_CREATED))) {
					refuse = false;
					report = flags & CHECK_CREATE;
				}
			}
		}
		break;
	case FS_KIND_UNIX:
		refuse = !(flags & CHECK_UNIX) && (!read || restricted);
		break;
	case FS_KIND_READABLE:
	case FS_KIND_PROTECTED: /* inside a writable root, so readable */
		refuse = !read;
		break;
	case FS_KIND_NONE:
		refuse = !read || restricted;
		break;
	default: /* FS_KIND_DENY_READ, FS_KIND_DEPTH */
		refuse = true;
		break;
	}
	if (!refuse && w.glob_hit) {
		refuse = true;
		w.kind = FS_KIND_DENY_GLOB;
		w.hit[0] = w.glob_hit; /* reported in fs_event.matched */
	}
	if (!refuse) {
		if (report && emit(&w, dentry, op, 0))
			return -EACCES; /* userspace would not hear of it: refused, counted as lost */
		return 0;
	}
	emit(&w, dentry, op, EACCES);
	return -EACCES;
}

static __always_inline __u32 type_flags(struct dentry *d)
{
	struct inode *inode = BPF_CORE_READ(d, d_inode);
	if (!inode)
		return 0;
	return (BPF_CORE_READ(inode, i_mode) & S_IFMT) == S_IFDIR ? CHECK_LEAF_DIR : CHECK_LEAF_FILE;
}

/*
 * Writing to a terminal or a harmless character device changes no file;
 * shells open /dev/null and /dev/tty for writing all the time.
 */
static __always_inline bool harmless_device(struct inode *inode)
{
	struct inode___fs *i = (void *)inode;
	umode_t fmt = BPF_CORE_READ(i, i_mode) & S_IFMT;
	if (fmt != S_IFCHR)
		return false;
	dev_t rdev = BPF_CORE_READ(i, i_rdev);
	__u32 major = rdev >> 20, minor = rdev & ((1U << 20) - 1);
	switch (major) {
	case 1: /* null, zero, full, random, urandom; not mem, kmem, port */
		return minor == 3 || minor == 5 || minor == 7 || minor == 8 || minor == 9;
	case 4: /* tty, ttyS */
	case 5: /* /dev/tty, console, ptmx */
		return true;
	default: /* pts */
		return major >= 136 && major <= 143;
	}
}


/*
 * check_file_write judges writing through file. FIFOs and sockets hold no
 * data, some devices are harmless.
 */
static __always_inline int check_file_write(struct file *file, __u32 op, __u32 flags)
{
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	umode_t fmt = BPF_CORE_READ(inode, i_mode) & S_IFMT;
	if (fmt != S_IFREG && fmt != S_IFDIR && fmt != S_IFBLK && (fmt != S_IFCHR || harmless_device(inode)))
		return 0;
	struct dentry *d = BPF_CORE_READ(file, f_path.dentry);
	return check((__u64)d, op, flags | type_flags(d));
}

/* Guards open(2) and its relatives, for writing, truncating and reading. */
SEC("lsm/file_open")
int BPF_PROG(fs_file_open, struct file *file, int ret)
{
	if (ret)
		return ret;
	fmode_t mode = BPF_CORE_READ(file, f_mode);
	unsigned int fflags = BPF_CORE_READ(file, f_flags);
	if ((mode & FMODE_WRITE) || (fflags & O_TRUNC))
		return check_file_write(file, FS_OP_OPEN_WRITE,
					(mode & FMODE_READ ? CHECK_GLOB : 0) | (mode & FMODE_CREATED ? CHECK_CREATED : 0));
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	if ((BPF_CORE_READ(inode, i_mode) & S_IFMT) == S_IFCHR && harmless_device(inode))
		return 0;
	struct dentry *d = BPF_CORE_READ(file, f_path.dentry);
	return check((__u64)d, FS_OP_OPEN_READ, CHECK_READ | CHECK_GLOB | type_flags(d));
}

/*
 * A writable file passed in (SCM_RIGHTS) from outside the session would
 * let the session write where it may not open: judge it as an open.
 */
SEC("lsm/file_receive")
int BPF_PROG(fs_file_receive, struct file *file, int ret)
{
	if (ret)
		return ret;
	fmode_t mode = BPF_CORE_READ(file, f_mode);
	if (!(mode & FMODE_WRITE))
		return 0;
	return check_file_write(file, FS_OP_RECEIVE, 0);
}

/*
 * A shared writable mapping writes the file like write(2) does. Opening
 * for writing is judged at open, but an fd can predate the session
 * (attach) and mprotect can add PROT_WRITE to a shared mapping later.
 */
#define PROT_WRITE 0x2
#define MAP_SHARED 0x01 /* also set in MAP_SHARED_VALIDATE */
#define VM_SHARED 0x00000008

SEC("lsm/mmap_file")
int BPF_PROG(fs_mmap_file, struct file *file, unsigned long reqprot, unsigned long prot, unsigned long mflags, int ret)
{
	if (ret || !file || !(prot & PROT_WRITE) || !(mflags & MAP_SHARED))
		return ret;
	return check_file_write(file, FS_OP_MMAP, 0);
}

struct vm_area_struct___fs {
	unsigned long vm_flags;
	struct file *vm_file;
} __attribute__((preserve_access_index));

SEC("lsm/file_mprotect")
int BPF_PROG(fs_file_mprotect, struct vm_area_struct___fs *vma, unsigned long reqprot, unsigned long prot, int ret)
{
	if (ret || !(prot & PROT_WRITE))
		return ret;
	struct vm_area_struct___fs *v = vma;
	struct file *file = BPF_CORE_READ(v, vm_file);
	if (!file || !(BPF_CORE_READ(v, vm_flags) & VM_SHARED))
		return 0;
	return check_file_write(file, FS_OP_MMAP, 0);
}

/*
 * AF_UNIX: connecting to a pathname socket reaches the process behind it
 * (docker.sock, the D-Bus system bus, ssh-agent). A socket is judged like
 * a write to its inode, or allowed when the policy lists it (FS_KIND_UNIX).
 * Abstract and unnamed sockets have no inode: unix.c judges them.
 */
struct unix_sock___fs {
	struct path path;
} __attribute__((preserve_access_index));

struct socket___fs {
	struct sock *sk;
} __attribute__((preserve_access_index));

static __always_inline int check_unix(void *other_sk)
{
	struct dentry *d = BPF_CORE_READ((struct unix_sock___fs *)other_sk, path.dentry);
	if (!d)
		return 0;
	return check((__u64)d, FS_OP_UNIX_CONNECT, CHECK_UNIX | CHECK_LEAF_FILE);
}

/* Guards connect(2) on stream and seqpacket sockets. */
SEC("lsm/unix_stream_connect")
int BPF_PROG(fs_unix_stream_connect, struct sock *sock, struct sock *other, struct sock *newsk, int ret)
{
	if (ret)
		return ret;
	return check_unix(other);
}

/* Guards connect(2) and sendto(2) on datagram sockets. */
SEC("lsm/unix_may_send")
int BPF_PROG(fs_unix_may_send, struct socket *sock, struct socket *other, int ret)
{
	if (ret)
		return ret;
	return check_unix(BPF_CORE_READ((struct socket___fs *)other, sk));
}

/*
 * From 6.2 ftruncate(2) reaches file_truncate instead of path_truncate.
 * The fd was opened for writing (and judged then) unless it came from
 * outside; judging again costs nothing. Loaded only where the hook exists.
 */
SEC("lsm/file_truncate")
int BPF_PROG(fs_file_truncate, struct file *file, int ret)
{
	if (ret)
		return ret;
	struct dentry *d = BPF_CORE_READ(file, f_path.dentry);
	return check((__u64)d, FS_OP_TRUNCATE, type_flags(d));
}

SEC("lsm/path_truncate")
int BPF_PROG(fs_path_truncate, const struct path *path, int ret)
{
	if (ret)
		return ret;
	struct dentry *d = BPF_CORE_READ(path, dentry);
	return check((__u64)d, FS_OP_TRUNCATE, type_flags(d));
}

SEC("lsm/path_unlink")
int BPF_PROG(fs_path_unlink, const struct path *dir, struct dentry *dentry, int ret)
{
	if (ret)
		return ret;
	return check((__u64)dentry, FS_OP_UNLINK, CHECK_ENTRY | type_flags(dentry));
}

SEC("lsm/path_rmdir")
int BPF_PROG(fs_path_rmdir, const struct path *dir, struct dentry *dentry, int ret)
{
	if (ret)
		return ret;
	return check((__u64)dentry, FS_OP_RMDIR, CHECK_ENTRY | CHECK_LEAF_DIR);
}

SEC("lsm/path_mkdir")
int BPF_PROG(fs_path_mkdir, const struct path *dir, struct dentry *dentry, umode_t mode, int ret)
{
	if (ret)
		return ret;
	return check((__u64)dentry, FS_OP_MKDIR, CHECK_ENTRY | CHECK_LEAF_DIR);
}

/*
 * Also reached by open(O_CREAT) for a new regular file (mode S_IFREG), and
 * by mknod(2) of one (S_IFREG or 0): only those may be checked_at_end
 * entries, never a FIFO, socket or device.
 */
SEC("lsm/path_mknod")
int BPF_PROG(fs_path_mknod, const struct path *dir, struct dentry *dentry, umode_t mode, unsigned int dev, int ret)
{
	if (ret)
		return ret;
	__u32 fmt = mode & S_IFMT;
	__u32 create = fmt == S_IFREG || fmt == 0 ? CHECK_CREATE : 0;
	return check((__u64)dentry, FS_OP_MKNOD, CHECK_ENTRY | CHECK_LEAF_FILE | create);
}

/*
 * A symlink redirects every name below it, so, as for a new link or a
 * rename's target, it may not be any part of a pattern: a link at
 * .git/modules/x would hand that submodule's hooks to wherever it points.
 */
SEC("lsm/path_symlink")
int BPF_PROG(fs_path_symlink, const struct path *dir, struct dentry *dentry, const char *old_name, int ret)
{
	if (ret)
		return ret;
	return check((__u64)dentry, FS_OP_SYMLINK, CHECK_ENTRY | CHECK_PREFIX | CHECK_LEAF_FILE);
}

SEC("lsm/path_link")
int BPF_PROG(fs_path_link, struct dentry *old_dentry, const struct path *new_dir, struct dentry *new_dentry, int ret)
{
	if (ret)
		return ret;
	/* A new name for an inode lets it be written there: the inode must
	 * be writable where it is. Nor may an entry a deny-read glob
	 * matches get a second name the glob does not match (also for
	 * rename below). */
	int err = check((__u64)old_dentry, FS_OP_LINK_SOURCE, CHECK_ENTRY | CHECK_GLOB | CHECK_LEAF_FILE);
	if (err)
		return err;
	return check((__u64)new_dentry, FS_OP_LINK, CHECK_ENTRY | CHECK_PREFIX | CHECK_LEAF_FILE);
}

/*
 * Both ends, always as CHECK_PREFIX: moving a directory that is part of a
 * pattern (`mv .git x`) would take what it protects out of the pattern's
 * reach, moving one into such a name would bring unprotected content in.
 * RENAME_EXCHANGE moves both entries; the same two checks cover it.
 */
SEC("lsm/path_rename")
int BPF_PROG(fs_path_rename, const struct path *old_dir, struct dentry *old_dentry, const struct path *new_dir,
	     struct dentry *new_dentry, unsigned int rflags, int ret)
{
	if (ret)
		return ret;
	int err = check((__u64)old_dentry, FS_OP_RENAME_SOURCE, CHECK_ENTRY | CHECK_PREFIX | CHECK_GLOB | type_flags(old_dentry));
	if (err)
		return err;
	return check((__u64)new_dentry, FS_OP_RENAME_TARGET, CHECK_ENTRY | CHECK_PREFIX | type_flags(old_dentry));
}

SEC("lsm/path_chmod")
int BPF_PROG(fs_path_chmod, const struct path *path, umode_t mode, int ret)
{
	if (ret)
		return ret;
	struct dentry *d = BPF_CORE_READ(path, dentry);
	return check((__u64)d, FS_OP_CHMOD, type_flags(d));
}

SEC("lsm/path_chown")
int BPF_PROG(fs_path_chown, const struct path *path, __u32 uid, __u32 gid, int ret)
{
	if (ret)
		return ret;
	struct dentry *d = BPF_CORE_READ(path, dentry);
	return check((__u64)d, FS_OP_CHOWN, type_flags(d));
}

/*
 * inode_setattr covers what no path hook sees (utimes). Its arguments
 * changed in 6.3 (a mnt_idmap came first); userspace loads the variant
 * matching the kernel's BTF.
 */
SEC("lsm/inode_setattr")
int BPF_PROG(fs_inode_setattr, struct dentry *dentry, struct iattr *attr, int ret)
{
	if (ret)
		return ret;
	return check((__u64)dentry, FS_OP_SETATTR, type_flags(dentry));
}

SEC("lsm/inode_setattr")
int BPF_PROG(fs_inode_setattr_idmap, void *idmap, struct dentry *dentry, struct iattr *attr, int ret)
{
	if (ret)
		return ret;
	return check((__u64)dentry, FS_OP_SETATTR, type_flags(dentry));
}

/* The first argument is a user_namespace (6.1) or a mnt_idmap (6.3+). */
SEC("lsm/inode_setxattr")
int BPF_PROG(fs_inode_setxattr, void *idmap, struct dentry *dentry, const char *name, const void *value, __u64 size,
	     int xflags, int ret)
{
	if (ret)
		return ret;
	return check((__u64)dentry, FS_OP_SETXATTR, type_flags(dentry));
}

SEC("lsm/inode_removexattr")
int BPF_PROG(fs_inode_removexattr, void *idmap, struct dentry *dentry, const char *name, int ret)
{
	if (ret)
		return ret;
	return check((__u64)dentry, FS_OP_REMOVEXATTR, type_flags(dentry));
}
