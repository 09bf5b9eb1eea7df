// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * self.c: BPF-LSM self-protection for sessions (DESIGN §2, §3).
 *
 * A session may not reach out of its boundary through the kernel's own
 * interfaces: load BPF (which could detach these very programs), trace or
 * signal a task outside its cgroup (the supervisor above all), push
 * keystrokes into a terminal, load kernel code or data, or change which
 * inode a path names by mounting. None of it depends on a file, so every
 * hook only asks whether the caller is in a session (fs_sessions,
 * session.h) and, where a task is reached for, whether that task is in
 * the same cgroup.
 *
 * Hooks (each refuses with EPERM and an FS_KIND_SELF event, refuse_self):
 *   lsm/bpf                    every bpf(2) command         FS_OP_BPF
 *   lsm/ptrace_access_check    ptrace(2), /proc/PID/mem and the like
 *                              of a task outside the cgroup  FS_OP_PTRACE
 *   lsm/task_kill              a signal to a task outside    FS_OP_KILL
 *   lsm/file_ioctl             TIOCSTI, TIOCLINUX            FS_OP_TIOCSTI
 *   lsm/kernel_module_request  module autoloading            FS_OP_MODULE
 *   lsm/kernel_read_file       finit_module, kexec_file_load, firmware and
 *                              policy read from a file       FS_OP_KERNEL_LOAD
 *   lsm/kernel_load_data       init_module, kexec_load       FS_OP_KERNEL_LOAD
 *   lsm/sb_mount               mount(2)                      FS_OP_MOUNT
 *   lsm/move_mount             move_mount(2)                 FS_OP_MOUNT
 *   lsm/sb_umount              umount(2)                     FS_OP_MOUNT
 *   lsm/sb_pivotroot           pivot_root(2)                 FS_OP_MOUNT
 *   lsm/task_alloc             clone3(2) with CLONE_INTO_CGROUP
 *                              (a child in another cgroup)   FS_OP_CLONE_INTO_CGROUP
 */
#include "common.h"
#include "fs.h"
#include "session.h"

char __license[] SEC("license") = "Dual BSD/GPL";

struct kernfs_node___self {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup___self {
	struct kernfs_node___self *kn;
} __attribute__((preserve_access_index));

struct css_set___self {
	struct cgroup___self *dfl_cgrp;
} __attribute__((preserve_access_index));

struct task_struct___self {
	struct css_set___self *cgroups;
	pid_t tgid;
} __attribute__((preserve_access_index));

#define TIOCSTI 0x5412
#define CLONE_INTO_CGROUP 0x200000000ULL
#define TIOCLINUX 0x541C

static __always_inline bool same_cgroup(void *task, __u64 cgroup_id)
{
	struct task_struct___self *t = task;
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id) == cgroup_id;
}

SEC("lsm/bpf")
int BPF_PROG(self_bpf, int cmd, void *attr, unsigned int size, int ret)
{
	__u64 cgroup_id;
	if (ret || !in_session(&cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_BPF, 0, 0);
}

SEC("lsm/ptrace_access_check")
int BPF_PROG(self_ptrace_access_check, struct task_struct *child, unsigned int mode, int ret)
{
	__u64 cgroup_id;
	if (ret || !in_session(&cgroup_id) || same_cgroup(child, cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_PTRACE, BPF_CORE_READ((struct task_struct___self *)child, tgid), 0);
}

SEC("lsm/task_kill")
int BPF_PROG(self_task_kill, struct task_struct *p, void *info, int sig, const struct cred *cred, int ret)
{
	__u64 cgroup_id;
	if (ret || !in_session(&cgroup_id) || same_cgroup(p, cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_KILL, BPF_CORE_READ((struct task_struct___self *)p, tgid), 0);
}

SEC("lsm/file_ioctl")
int BPF_PROG(self_file_ioctl, struct file *file, unsigned int cmd, unsigned long arg, int ret)
{
	__u64 cgroup_id;
	if (ret || (cmd != TIOCSTI && cmd != TIOCLINUX) || !in_session(&cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_TIOCSTI, 0, 0);
}

/* Guards module autoloading (request_module) on the session's behalf. */
SEC("lsm/kernel_module_request")
int BPF_PROG(self_kernel_module_request, char *kmod_name, int ret)
{
	__u64 cgroup_id;
	if (ret || !in_session(&cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_MODULE, 0, 0);
}

/* Guards finit_module, kexec_file_load, firmware and policy loads from a file. */
SEC("lsm/kernel_read_file")
int BPF_PROG(self_kernel_read_file, struct file *file, int id, bool contents, int ret)
{
	__u64 cgroup_id;
	if (ret || !in_session(&cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_KERNEL_LOAD, 0, 0);
}

/* Guards init_module and kexec_load from a buffer. */
SEC("lsm/kernel_load_data")
int BPF_PROG(self_kernel_load_data, int id, bool contents, int ret)
{
	__u64 cgroup_id;
	if (ret || !in_session(&cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_KERNEL_LOAD, 0, 0);
}

/*
 * Mounts change which inode a path names: a bind mount of a writable
 * directory over .git/hooks would plant hooks that the user's git, outside
 * the session, runs. A session mounts nothing.
 */
SEC("lsm/sb_mount")
int BPF_PROG(self_sb_mount, const char *dev_name, const struct path *path, const char *type, unsigned long flags,
	     void *data, int ret)
{
	__u64 cgroup_id;
	if (ret || !in_session(&cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_MOUNT, 0, 0);
}

SEC("lsm/move_mount")
int BPF_PROG(self_move_mount, const struct path *from_path, const struct path *to_path, int ret)
{
	__u64 cgroup_id;
	if (ret || !in_session(&cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_MOUNT, 0, 0);
}

SEC("lsm/sb_umount")
int BPF_PROG(self_sb_umount, struct vfsmount *mnt, int flags, int ret)
{
	__u64 cgroup_id;
	if (ret || !in_session(&cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_MOUNT, 0, 0);
}

SEC("lsm/sb_pivotroot")
int BPF_PROG(self_sb_pivotroot, const struct path *old_path, const struct path *new_path, int ret)
{
	__u64 cgroup_id;
	if (ret || !in_session(&cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_MOUNT, 0, 0);
}

/*
 * clone3's CLONE_INTO_CGROUP starts the child in the cgroup an O_PATH
 * descriptor names, outside the session's network programs, limits and
 * cgroup.kill; the kernel only asks for write permission on the common
 * ancestor's cgroup.procs, which uid 0 has without any capability, and no
 * filesystem hook sees the descriptor used. copy_process calls this hook
 * with clone3's 64-bit flags before cgroup_can_fork moves anything, so the
 * child never runs. A `run` session's seccomp filter answers clone3 with
 * ENOSYS before it gets here; this is what holds an attached process,
 * which no filter can be put on. A session starts no child elsewhere, not
 * even in a group below its own (nested sessions are moved by their
 * supervisor, outside every session). Checked before the session lookup:
 * the hook runs on every fork of the machine.
 */
SEC("lsm/task_alloc")
int BPF_PROG(self_task_alloc, struct task_struct *task, unsigned long clone_flags, int ret)
{
	__u64 cgroup_id;
	if (ret || !(clone_flags & CLONE_INTO_CGROUP) || !in_session(&cgroup_id))
		return ret;
	return refuse_self(cgroup_id, FS_OP_CLONE_INTO_CGROUP, 0, 0);
}
