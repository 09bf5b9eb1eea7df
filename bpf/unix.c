// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * unix.c: BPF-LSM judgement of abstract AF_UNIX peers (DESIGN §2, §3).
 *
 * An abstract socket lives in its network namespace's name space, not in
 * a filesystem: it has no inode, so no anchor or pattern of fs.c can judge
 * it, and below Landlock ABI 6 nothing else scopes it either. On a desktop
 * @/tmp/.X11-unix/X0 is the user's display and keyboard. A session may
 * connect or send to an abstract socket only when the socket was created
 * in the session or in a session nested below it: its socket cgroup
 * (sk_cgrp_data, the cgroup v2 group of the task that created it) is the
 * caller's session cgroup or one of its descendants, as nested sessions'
 * cgroups lie below their parent's. That is the scope Landlock's
 * LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET gives: a child reaches nothing of
 * its parent, a parent reaches its children. The network policy does not
 * change it, "full" included: abstract sockets are local IPC, not network.
 *
 * Pathname sockets are fs.c's (judged by inode, like a write, unless the
 * policy lists them); unnamed ones (socketpair, never bound) can only be
 * reached through an fd the session already holds, and are not judged.
 * A socket that predates the session (attach) keeps the cgroup it was
 * created in, so the session's own older listeners count as outside.
 *
 * fs.c's programs are attached to the same two hooks; whichever runs
 * second sees the first one's verdict in ret. They never both judge one
 * socket.
 *
 * Hooks (each refuses with EPERM, as Landlock's scoping does, and an
 * FS_OP_UNIX_CONNECT event of kind FS_KIND_UNIX_PEER whose path is the
 * abstract name, FS_EVENT_ABSTRACT):
 *   lsm/unix_stream_connect  connect(2) on stream and seqpacket sockets
 *   lsm/unix_may_send        connect(2), sendto(2), sendmsg(2) on datagram
 *                            sockets
 */
#include "common.h"
#include "fs.h"
#include "session.h"

char __license[] SEC("license") = "Dual BSD/GPL";

/*
 * How many cgroup levels the peer's socket may lie below the session: the
 * bound of the walk up from the peer's cgroup. Nested sessions are a few
 * levels deep; a peer deeper than this is refused (fail closed).
 */
#define UNIX_MAX_NESTING 32

struct kernfs_node___unix {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup___unix;

struct cgroup_subsys_state___unix {
	struct cgroup___unix *cgroup;
	struct cgroup_subsys_state___unix *parent;
} __attribute__((preserve_access_index));

struct cgroup___unix {
	struct cgroup_subsys_state___unix self;
	struct kernfs_node___unix *kn;
} __attribute__((preserve_access_index));

struct sock_cgroup_data___unix {
	struct cgroup___unix *cgroup; /* cgroup v2, since 5.15 a plain pointer */
} __attribute__((preserve_access_index));

struct sock___unix {
	struct sock_cgroup_data___unix sk_cgrp_data;
} __attribute__((preserve_access_index));

struct sockaddr_un___unix {
	unsigned short sun_family;
	char sun_path[108];
};

/* len counts sun_family and the name, an abstract name's leading 0 included. */
struct unix_address___unix {
	int len;
	struct sockaddr_un___unix name[];
} __attribute__((preserve_access_index));

struct unix_sock___unix {
	struct unix_address___unix *addr;
	struct path path;
} __attribute__((preserve_access_index));

struct socket___unix {
	struct sock *sk;
} __attribute__((preserve_access_index));

/* peer_in_session reports whether sk was created in session or below it. */
static __always_inline bool peer_in_session(struct sock___unix *sk, __u64 session)
{
	struct cgroup___unix *cg = BPF_CORE_READ(sk, sk_cgrp_data.cgroup);
	for (int i = 0; i < UNIX_MAX_NESTING && cg; i++) {
		if (BPF_CORE_READ(cg, kn, id) == session)
			return true;
		cg = BPF_CORE_READ(cg, self.parent, cgroup);
	}
	return false;
}

/*
 * refuse_peer reports the refusal of a connect or send to the abstract
 * socket whose unix_address is at addr (len its len field) and returns
 * -EPERM, also when the event cannot be sent. The path holds the name
 * without its leading 0 byte, raw: userspace prints it after an "@".
 */
static __noinline int refuse_peer(__u64 cgroup_id, __u64 addr, __s32 len)
{
	struct fs_event *e = fs_refusal(cgroup_id, FS_OP_UNIX_CONNECT, FS_KIND_UNIX_PEER);
	if (!e)
		return -EPERM;
	e->flags = FS_EVENT_ABSTRACT;

	/* sun_family (2 bytes) and the leading 0 come before the name. */
	__s64 n = (__s64)len - 3;
	if (n < 0)
		n = 0;
	if (n > (__s64)sizeof(((struct sockaddr_un___unix *)0)->sun_path) - 1)
		n = sizeof(((struct sockaddr_un___unix *)0)->sun_path) - 1;
	__u64 name = addr + bpf_core_field_offset(struct unix_address___unix, name) + 3;
	bpf_probe_read_kernel(e->path, n & 127, (const void *)name);
	e->path_off = n & 127;
	oxs_event_submit(e);
	return -EPERM;
}

/*
 * check_peer judges a connect or send by the current task to the AF_UNIX
 * socket other: 0, or -EPERM for an abstract one outside the session.
 */
static __always_inline int check_peer(void *other)
{
	__u64 cgroup_id;
	if (!other || !current_session(&cgroup_id))
		return 0;
	struct unix_sock___unix *u = other;
	if (BPF_CORE_READ(u, path.dentry))
		return 0; /* a pathname socket: fs.c judges its inode */
	struct unix_address___unix *addr = BPF_CORE_READ(u, addr);
	if (!addr)
		return 0; /* unnamed: reached through an fd the session holds */
	if (peer_in_session(other, cgroup_id))
		return 0;
	return refuse_peer(cgroup_id, (__u64)addr, BPF_CORE_READ(addr, len));
}

SEC("lsm/unix_stream_connect")
int BPF_PROG(unix_stream_connect, struct sock *sock, struct sock *other, struct sock *newsk, int ret)
{
	if (ret)
		return ret;
	return check_peer(other);
}

SEC("lsm/unix_may_send")
int BPF_PROG(unix_may_send, struct socket *sock, struct socket *other, int ret)
{
	if (ret)
		return ret;
	return check_peer(BPF_CORE_READ((struct socket___unix *)other, sk));
}
