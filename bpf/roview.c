// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * roview.c: the audit of the read-only view's refusals (DESIGN §5, §9).
 *
 * On the Landlock path a session's mount namespace is read-only outside
 * its writable roots (landlock/roview_linux.go). The VFS refuses a write,
 * a creation or a metadata change there with EROFS before any LSM hook
 * runs, so neither Landlock nor any other LSM sees or reports it. This
 * object reports it: one program on the exit of every system call, which
 * returns at once unless the call failed with EROFS and the caller is in
 * a session (roview_sessions), and then sends a roview_event through the
 * ring buffer every object shares (events.h), under the same flood control
 * and loss accounting. It decides nothing: enforcement is the mount view's.
 *
 * Which argument of which system call names the file is not known here:
 * userspace (loader.ROViewSyscalls, one table per architecture) fills
 * roview_syscalls, so that one object serves every architecture and the
 * numbers are written down once. A call missing from the table is still
 * reported, with its number and no path.
 *
 * The path arguments are copied as the caller passed them. A relative one
 * is completed here, while the caller still exists, with the directory it
 * is relative to (the dirfd's file or the working directory), walked up
 * through the mounts of the caller's namespace: an event read after the
 * process exited still names the file. The command line comes from the
 * caller's memory for the same reason.
 *
 * A call that only asks (access(2) for W_OK answers EROFS there) is
 * listed as ROVIEW_OP_QUERY and not reported: it is no refusal.
 *
 * Hooks (each reports, none refuses):
 *   raw_tracepoint/sys_exit  every system call's return: -EROFS of a
 *                            session task -> roview_event
 */
#include "common.h"
#include "events.h"

char __license[] SEC("license") = "Dual BSD/GPL";

#define EROFS 30
#define AT_FDCWD -100

/* Room for each path argument, the directory and the command line. */
#define ROVIEW_PATH_LEN 512
#define ROVIEW_DIR_LEN 1024
#define ROVIEW_DIR_COMPONENTS 64
#define ROVIEW_ARGS_LEN 256
/* Bound of the syscall table (every architecture's numbers are below). */
#define ROVIEW_SYSCALLS 1024

/*
 * roview_syscall.op of a call that asks a question rather than changes
 * anything (access(2) with W_OK answers EROFS on a read-only mount): not a
 * refusal, not reported.
 */
#define ROVIEW_OP_QUERY 255

/* roview_event.flags */
#define ROVIEW_DIR_SET (1U << 0)       /* dir holds the directory of path (or fd's file) */
#define ROVIEW_DIR_TRUNCATED (1U << 1) /* dir lost its leading components */
#define ROVIEW_DIR_IS_FILE (1U << 2)   /* dir is the file fd (or an empty path's dirfd) names */
#define ROVIEW_NO_DIR (1U << 3)        /* the dirfd names no open file */

/*
 * How a system call names its file, filled by userspace. Argument
 * positions count from 1; 0 is "none". A dirfd of 0 means the path is
 * relative to the working directory.
 */
struct roview_syscall {
	__u8 op;     /* userspace's operation number, copied into the event */
	__u8 path;   /* the path of the file changed or created */
	__u8 dirfd;  /* the directory fd path is relative to */
	__u8 path2;  /* a second path (rename's and link's other name) */
	__u8 dirfd2; /* the directory fd path2 is relative to */
	__u8 fd;     /* an fd naming the file itself (fchmod, fchown, ...) */
	__u8 _pad[2];
};

struct roview_event {
	struct oxs_event_header hdr; /* source OXS_SOURCE_ROVIEW */
	__u32 pid;  /* tgid */
	__u32 tid;
	__u32 ppid; /* tgid of the caller's parent (real_parent) */
	__u32 uid;
	__s32 nr;   /* system call number */
	__u32 op;   /* roview_syscall.op, 0 for a call not in the table */
	__s32 dirfd;  /* the dirfd argument (AT_FDCWD when none) */
	__s32 dirfd2;
	__s32 fd;     /* the fd argument, -1 when none */
	__u32 flags;  /* ROVIEW_* */
	__u16 dir_off;  /* dir[0:dir_off] holds the names, leaf first */
	__u16 args_len; /* args[0:args_len] is the command line, NUL-separated */
	__u32 _pad;
	char comm[16];
	char path[ROVIEW_PATH_LEN];
	char path2[ROVIEW_PATH_LEN];
	char dir[ROVIEW_DIR_LEN];
	char args[ROVIEW_ARGS_LEN];
};

const struct roview_event *unused_roview_event __attribute__((unused));

/*
 * The sessions to report: cgroup v2 id -> 0. The value is a zero the
 * verifier cannot see through, for dir_build (see fs.c's path_build).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} roview_sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ROVIEW_SYSCALLS);
	__type(key, __u32);
	__type(value, struct roview_syscall);
} roview_syscalls SEC(".maps");

/*
 * The kernel types only this object reads. The ___ suffix is a CO-RE
 * flavour: each matches the kernel type of the name before it, so
 * common.h stays the shared subset. pt_regs differs per architecture; the
 * flavour the running kernel lacks is dead code (bpf_core_field_exists).
 */
#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)
struct pt_regs___x86 {
	unsigned long di, si, dx, r10, r8, r9, orig_ax;
};
struct pt_regs___arm64 {
	__u64 regs[31];
	__u64 orig_x0;
	__s32 syscallno;
};
struct fs_struct {
	struct path root, pwd;
};
struct fdtable {
	unsigned int max_fds;
	struct file **fd;
};
struct files_struct {
	struct fdtable *fdt;
};
struct mm_struct {
	unsigned long arg_start, arg_end;
};
struct task_struct___roview {
	struct fs_struct *fs;
	struct files_struct *files;
	struct mm_struct *mm;
};
struct mount {
	struct mount *mnt_parent;
	struct dentry *mnt_mountpoint;
	struct vfsmount mnt;
};
#pragma clang attribute pop

struct bpf_raw_tracepoint_args {
	__u64 args[0];
};

/* arg returns argument i (1-based) of the system call regs saved. */
static __always_inline __u64 arg(void *regs, __u32 i)
{
	if (bpf_core_field_exists(struct pt_regs___x86, orig_ax)) {
		struct pt_regs___x86 *r = regs;
		switch (i) {
		case 1: return BPF_CORE_READ(r, di);
		case 2: return BPF_CORE_READ(r, si);
		case 3: return BPF_CORE_READ(r, dx);
		case 4: return BPF_CORE_READ(r, r10);
		case 5: return BPF_CORE_READ(r, r8);
		case 6: return BPF_CORE_READ(r, r9);
		}
		return 0;
	}
	if (bpf_core_field_exists(struct pt_regs___arm64, syscallno)) {
		struct pt_regs___arm64 *r = regs;
		/* x0 holds the return value by now; orig_x0 the argument. */
		if (i == 1)
			return BPF_CORE_READ(r, orig_x0);
		if (i >= 2 && i <= 6)
			return BPF_CORE_READ(r, regs[i - 1]);
	}
	return 0;
}

static __always_inline __s32 syscall_nr(void *regs)
{
	if (bpf_core_field_exists(struct pt_regs___x86, orig_ax))
		return (__s32)BPF_CORE_READ((struct pt_regs___x86 *)regs, orig_ax);
	if (bpf_core_field_exists(struct pt_regs___arm64, syscallno))
		return BPF_CORE_READ((struct pt_regs___arm64 *)regs, syscallno);
	return -1;
}

/* fd_file returns the caller's open file fd, or NULL. */
static __always_inline struct file *fd_file(struct task_struct___roview *task, __s32 fd)
{
	if (fd < 0)
		return NULL;
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || (__u32)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

/*
 * The state of the directory an event carries, built by dir_step. pos
 * and n start from roview_sessions' zero, which the verifier cannot see
 * through (see fs.c's path_build for why).
 */
struct dir_build {
	struct roview_event *e;
	__u64 dentry;
	__u64 mnt; /* struct mount * of dentry */
	__u64 root_dentry, root_mnt; /* the caller's root: the walk stops there */
	__u32 pos, n;
};

/*
 * dir_step adds one name to the event's dir, leaf first, '/'-separated,
 * or steps from a mount's root to where it is mounted. A bpf_loop
 * callback, as fs.c's path_step.
 */
static int dir_step(__u32 k, struct dir_build *b)
{
	struct roview_event *e = b->e;
	struct dentry *d = (struct dentry *)b->dentry;
	struct mount *m = (struct mount *)b->mnt;
	struct vfsmount *vm = (void *)m + bpf_core_field_offset(struct mount, mnt);
	if ((__u64)d == b->root_dentry && (__u64)vm == b->root_mnt)
		return 1;
	if (d == BPF_CORE_READ(vm, mnt_root)) {
		struct mount *parent = BPF_CORE_READ(m, mnt_parent);
		if (!parent || parent == m)
			return 1;
		b->dentry = (__u64)BPF_CORE_READ(m, mnt_mountpoint);
		b->mnt = (__u64)parent;
		return 0;
	}
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	if (!parent || parent == d)
		return 1;
	__u32 pos = b->pos;
	if (pos > ROVIEW_DIR_LEN - 257) {
		e->flags |= ROVIEW_DIR_TRUNCATED;
		return 1;
	}
	struct qstr q = BPF_CORE_READ(d, d_name);
	__u32 len = q.len & 255;
	bpf_probe_read_kernel(&e->dir[pos], len, q.name);
	pos += len;
	asm volatile("" : "+r"(pos));
	pos &= ROVIEW_DIR_LEN - 1;
	e->dir[pos] = '/';
	b->pos = pos + 1;
	b->dentry = (__u64)parent;
	b->n = k + 1;
	return 0;
}

/* fill_dir writes the path of p (in the caller's mount namespace) into e->dir. */
static __noinline int fill_dir(struct roview_event *e, struct path *p, struct fs_struct *fs, __u32 zero)
{
	if (!e || !p || !fs)
		return 0;
	struct vfsmount *vm = BPF_CORE_READ(p, mnt);
	struct dentry *d = BPF_CORE_READ(p, dentry);
	if (!vm || !d)
		return 0;
	struct dir_build b = {
		.e = e, .dentry = (__u64)d,
		.mnt = (__u64)((void *)vm - bpf_core_field_offset(struct mount, mnt)),
		.root_dentry = (__u64)BPF_CORE_READ(fs, root.dentry),
		.root_mnt = (__u64)BPF_CORE_READ(fs, root.mnt),
		.pos = zero, .n = zero,
	};
	bpf_loop(ROVIEW_DIR_COMPONENTS, dir_step, &b, 0);
	if (b.n == ROVIEW_DIR_COMPONENTS)
		e->flags |= ROVIEW_DIR_TRUNCATED;
	e->dir_off = b.pos;
	e->flags |= ROVIEW_DIR_SET;
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int roview_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	/* Every system call of the machine passes here: the two checks that
	 * turn nearly all of them away come first and cost a compare and a
	 * hash lookup. */
	if ((long)ctx->args[1] != -EROFS)
		return 0;
	__u64 cgroup_id = bpf_get_current_cgroup_id();
	__u32 *zero = bpf_map_lookup_elem(&roview_sessions, &cgroup_id);
	if (!zero)
		return 0;

	void *regs = (void *)ctx->args[0];
	__u32 nr = syscall_nr(regs);
	struct roview_syscall *sc = nr < ROVIEW_SYSCALLS ? bpf_map_lookup_elem(&roview_syscalls, &nr) : NULL;
	if (sc && sc->op == ROVIEW_OP_QUERY)
		return 0;
	struct roview_event *e = oxs_event_reserve(cgroup_id, OXS_SOURCE_ROVIEW, sizeof(*e));
	if (!e)
		return 0;
	struct task_struct___roview *task = (void *)bpf_get_current_task();
	/* Ring buffer memory is not zeroed: no field may keep an old record's bytes. */
	__builtin_memset((void *)e + sizeof(e->hdr), 0, offsetof(struct roview_event, comm) - sizeof(e->hdr));
	OXS_EVENT_CALLER(e);
	e->ppid = BPF_CORE_READ((struct task_struct *)task, real_parent, tgid);
	e->nr = nr;
	e->dirfd = AT_FDCWD;
	e->dirfd2 = AT_FDCWD;
	e->fd = -1;
	e->path[0] = 0;
	e->path2[0] = 0;

	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	if (mm) {
		unsigned long start = BPF_CORE_READ(mm, arg_start);
		unsigned long end = BPF_CORE_READ(mm, arg_end);
		__u32 len = end > start ? end - start : 0;
		if (len > ROVIEW_ARGS_LEN - 1)
			len = ROVIEW_ARGS_LEN - 1;
		if (len && !bpf_probe_read_user(e->args, len & (ROVIEW_ARGS_LEN - 1), (void *)start))
			e->args_len = len;
	}

	if (!sc || !sc->op) {
		oxs_event_submit(e);
		return 0;
	}
	e->op = sc->op;
	if (sc->dirfd)
		e->dirfd = (__s32)arg(regs, sc->dirfd);
	if (sc->dirfd2)
		e->dirfd2 = (__s32)arg(regs, sc->dirfd2);
	if (sc->fd)
		e->fd = (__s32)arg(regs, sc->fd);
	if (sc->path2) {
		const char *p2 = (const char *)arg(regs, sc->path2);
		if (p2)
			bpf_probe_read_user_str(e->path2, sizeof(e->path2), p2);
	}

	struct fs_struct *fs = BPF_CORE_READ(task, fs);
	if (sc->fd) {
		struct file *f = fd_file(task, e->fd);
		if (f) {
			e->flags |= ROVIEW_DIR_IS_FILE;
			fill_dir(e, &f->f_path, fs, *zero);
		}
		oxs_event_submit(e);
		return 0;
	}
	const char *p = sc->path ? (const char *)arg(regs, sc->path) : NULL;
	long n = p ? bpf_probe_read_user_str(e->path, sizeof(e->path), p) : 0;
	/* A path that could not be read names nothing (the event says only
	 * which call failed); an absolute one needs no directory; a relative,
	 * an empty or a NULL one (utimensat(fd, NULL), AT_EMPTY_PATH) is the
	 * dirfd's. */
	if ((p && n <= 0) || (n > 1 && e->path[0] == '/')) {
		oxs_event_submit(e);
		return 0;
	}
	if (n <= 1)
		e->flags |= ROVIEW_DIR_IS_FILE;
	if (e->dirfd == AT_FDCWD) {
		if (fs)
			fill_dir(e, &fs->pwd, fs, *zero);
	} else {
		struct file *f = fd_file(task, e->dirfd);
		if (f)
			fill_dir(e, &f->f_path, fs, *zero);
		else
			e->flags |= ROVIEW_NO_DIR;
	}
	oxs_event_submit(e);
	return 0;
}
