/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * session.h: what every BPF-LSM object (fs.c, self.c, netfamily.c,
 * unix.c) shares about sessions.
 *
 * fs_sessions says which cgroups are sessions and holds each session's
 * rules. Every BPF-LSM object declares it here; userspace (loader.LoadFS)
 * creates it with the filesystem object and hands that one map to the
 * others, as it does with the event maps (events.h), so package fsguard
 * adds and removes a session in one place. A task in no session is never
 * affected by any program.
 *
 * Also here: the lookup of the caller's session, its parent as the kernel
 * knows it, and the refusal record of a decision about no file
 * (FS_KIND_SELF: self-protection, kernel interfaces, socket families).
 */
#ifndef OXS_SESSION_H
#define OXS_SESSION_H

#include "common.h"
#include "fs.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* cgroup v2 id */
	__type(value, struct fs_session);
} fs_sessions SEC(".maps");

/*
 * current_session returns the caller's session, or NULL for a task in no
 * session; *cgroup_id is the caller's cgroup v2 id either way.
 */
static __always_inline struct fs_session *current_session(__u64 *cgroup_id)
{
	*cgroup_id = bpf_get_current_cgroup_id();
	return bpf_map_lookup_elem(&fs_sessions, cgroup_id);
}

static __always_inline bool in_session(__u64 *cgroup_id)
{
	return current_session(cgroup_id) != NULL;
}

/*
 * current_ppid is the caller's parent as the kernel knows it when it
 * refuses: the process may be gone before userspace reads the event, and
 * its parent names what it ran under.
 */
static __always_inline __u32 current_ppid(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	return BPF_CORE_READ(task, real_parent, tgid);
}

/*
 * fs_refusal reserves the record of an EPERM refusal that has no path of
 * its own (refuse_self, unix.c's refuse_peer) and fills what they share:
 * the caller, op and kind; every other field is zero. NULL when the
 * record cannot be sent. Ring buffer memory is not zeroed, so no field
 * may keep an old record's bytes.
 */
static __always_inline struct fs_event *fs_refusal(__u64 cgroup_id, __u32 op, __u32 kind)
{
	struct fs_event *e = oxs_event_reserve(cgroup_id, OXS_SOURCE_FS, sizeof(*e));
	if (!e)
		return NULL;
	__builtin_memset((void *)e + sizeof(e->hdr), 0, offsetof(struct fs_event, comm) - sizeof(e->hdr));
	OXS_EVENT_CALLER(e);
	e->ppid = current_ppid();
	e->op = op;
	e->errno_ = EPERM;
	e->kind = kind;
	return e;
}

/*
 * refuse_self reports a refusal that concerns no file (FS_KIND_SELF) for
 * the session cgroup_id and returns -EPERM, also when the event cannot
 * be sent. target_pid and family say what was reached for, where that
 * applies (0 otherwise). fs.c has a record of its own (the path), so
 * leaves this unused.
 */
static __noinline __attribute__((unused)) int refuse_self(__u64 cgroup_id, __u32 op, __u32 target_pid, __u32 family)
{
	struct fs_event *e = fs_refusal(cgroup_id, op, FS_KIND_SELF);
	if (!e)
		return -EPERM;
	e->target_pid = target_pid;
	e->family = family;
	oxs_event_submit(e);
	return -EPERM;
}

#endif /* OXS_SESSION_H */
