// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * netfamily.c: the network policy's BPF-LSM program (DESIGN §4).
 *
 * The cgroup network programs (net.c) see only AF_INET and AF_INET6
 * sockets. Other families reach further: AF_PACKET reads and writes raw
 * frames, AF_VSOCK reaches the hypervisor host, others reach hardware.
 * Where the network policy is not full, package fsguard sets
 * FS_SESSION_INET_ONLY in the session (fs_sessions, session.h) and this
 * program allows only the families the network policy covers: AF_INET and
 * AF_INET6 (judged by net.c), AF_UNIX (judged on connect by fs.c) and
 * AF_NETLINK (how the C library learns the interfaces). Sockets the kernel
 * creates for itself are not judged.
 *
 * It is a BPF-LSM program, so it is loaded with the others by
 * loader.LoadFS and shares their session map and event maps.
 *
 * Hooks (each refuses with EPERM and an FS_KIND_SELF event, refuse_self):
 *   lsm/socket_create  socket(2) of another family  FS_OP_SOCKET (with the family)
 */
#include "common.h"
#include "fs.h"
#include "session.h"

char __license[] SEC("license") = "Dual BSD/GPL";

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define AF_NETLINK 16

SEC("lsm/socket_create")
int BPF_PROG(netfamily_socket_create, int family, int type, int protocol, int kern, int ret)
{
	__u64 cgroup_id;
	if (ret || kern || family == AF_UNIX || family == AF_INET || family == AF_INET6 || family == AF_NETLINK)
		return ret;
	struct fs_session *sess = current_session(&cgroup_id);
	if (!sess || !(sess->flags & FS_SESSION_INET_ONLY))
		return 0;
	return refuse_self(cgroup_id, FS_OP_SOCKET, 0, family);
}
