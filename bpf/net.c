// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * net.c: cgroup network enforcement for oxsupervise sessions (DESIGN §4).
 *
 * Every program is attached once, on the sessions' parent cgroup, and finds
 * its session by cgroup id (of the task's group or an ancestor); a task
 * outside every session is never affected. The socket hooks (connect,
 * sendmsg, sock_create) decide; the cgroup_skb/egress floor re-checks
 * every packet, judged by the socket's group rather than the sending
 * task's, so a path the socket hooks do not see (a session socket used by
 * a process outside the session) still cannot reach a refused destination.
 *
 * A destination on this host is loopback whatever its value: the host's
 * own addresses (eth0's included) reach the same services as 127.0.0.1,
 * so they are judged by the loopback setting, and admitted by an allow
 * entry only when it names exactly that address.
 *
 * Only UAPI types are used (bpf_sock_addr, bpf_sock, __sk_buff), so the
 * object needs no BTF of the running kernel and no CO-RE. The network
 * policy's one BPF-LSM program, on socket families these hooks never see,
 * is in netfamily.c.
 *
 * Hooks (a refusal returns 0, which the kernel turns into EPERM, and sends
 * a net_event):
 *   cgroup/connect4, connect6    connect(2): allow list, loopback setting,
 *                                metadata; DNS is redirected to the resolver
 *   cgroup/sendmsg4, sendmsg6    sendto(2) on unconnected UDP, the same
 *   cgroup/recvmsg4, recvmsg6    nothing refused: a redirected DNS reply
 *                                gets the address the program asked back
 *   cgroup/sock_create           raw and ICMP sockets, unless the policy is full
 *   cgroup/post_bind4, post_bind6  nothing refused: marks the socket as the
 *                                session's, bound (for loopback = session)
 *   cgroup_skb/egress            the floor: drops any packet of a session
 *                                socket to a refused destination
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "net.h"

#define SOCK_RAW 3
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_ICMP 1
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_ICMPV6_ 58
#define DNS_PORT 53
/* The loopback device has this ifindex in every network namespace. */
#define LOOPBACK_IFINDEX 1
/* How many covering prefixes one lookup may visit. Rules nest rarely more
 * than two or three deep; hitting the bound refuses (fail closed). */
#define MAX_PREFIX_WALK 8

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct net_session);
} net_sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct net_allow_key);
	__type(value, struct net_allow_val);
} net_allow SEC(".maps");

/* The prefixes this host delivers locally (see net.h). Userspace keeps it
 * in step with rtnetlink; it is what lets connect and sendmsg refuse a
 * host-local destination with an errno. The egress floor does not depend
 * on it being current: a packet the stack routes over lo is local whatever
 * this map says, so an address added a moment ago cannot open the host. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	/* Room for hosts with many addresses; unused entries cost nothing. */
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct net_local_key);
	__type(value, __u8);
} net_local SEC(".maps");

/* Every session resolver's listeners, by owner (see net.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4 * 4096);
	__type(key, struct net_listener_key);
	__type(value, __u64);
} net_resolvers SEC(".maps");

/* Per-socket state: the session that created or bound the socket (its
 * owner, for loopback = session), where the socket was allowed to connect
 * (the floor lets that flow pass after an allow entry expires, so open
 * connections survive), and the original DNS server of a redirected query
 * (recvmsg rewrites the reply's source back to it). BPF_F_CLONE copies it
 * to accepted sockets, so they belong to their listener's session. */
struct net_sk_info {
	__u64 owner; /* session cgroup id, 0 = none */
	__u32 allowed_addr[4];
	__u32 orig_addr[4];
	__u16 allowed_port;
	__u16 orig_port;
	__u8 allowed;
	__u8 redirected;
	__u8 bound; /* bind()-ed in the session: a server, not a client */
	/* allowed_addr was judged as a local destination (loopback rules):
	 * the floor reuses that verdict only for a packet that is local too,
	 * so a stale view of the host's addresses cannot carry over. */
	__u8 allowed_local;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct net_sk_info);
} net_sk SEC(".maps");

/* Force the event struct into BTF so bpf2go emits a Go type for it. */
const struct net_event *unused_net_event __attribute__((unused));

/* The deepest cgroup level searched for a session: sessions live a few
 * levels below the root; deeper levels are groups a session created
 * inside itself, which stay bound by the session's rules. */
#define MAX_CGROUP_LEVEL 16

/* current_session finds the session of the current task: the deepest
 * ancestor (or the group itself) that is a session. Only the supervisor
 * writes net_sessions, so a group a session created inside itself is
 * never one and stays bound by the session's rules (looking only at the
 * task's own group would let it escape); a nested session's group (a
 * command of an agent, docs/agents-tiers.md) is one, with rules the
 * supervisor made tighter than its parent's. */
static __always_inline struct net_session *current_session(__u64 *cgid)
{
	struct net_session *found = 0;
	for (int level = 1; level < MAX_CGROUP_LEVEL; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);
		if (id == 0)
			break;
		struct net_session *s = bpf_map_lookup_elem(&net_sessions, &id);
		if (s) {
			*cgid = id;
			found = s;
		}
	}
	return found;
}

/* skb_session is current_session for the cgroup of the packet's socket. */
static __always_inline struct net_session *skb_session(struct __sk_buff *skb, __u64 *cgid)
{
	struct net_session *found = 0;
	for (int level = 1; level < MAX_CGROUP_LEVEL; level++) {
		__u64 id = bpf_skb_ancestor_cgroup_id(skb, level);
		if (id == 0)
			break;
		struct net_session *s = bpf_map_lookup_elem(&net_sessions, &id);
		if (s) {
			*cgid = id;
			found = s;
		}
	}
	return found;
}

static __always_inline void emit(__u8 op, __u8 reason, __u64 cgid, const __u32 addr[4],
				 __u16 port, __u8 family, __u8 protocol, __u16 sock_type,
				 bool task)
{
	struct net_event *e = oxs_event_reserve(cgid, OXS_SOURCE_NET, sizeof(*e));
	if (!e)
		return;
	__builtin_memset((void *)e + sizeof(e->hdr), 0, sizeof(*e) - sizeof(e->hdr));
	e->time_ns = bpf_ktime_get_boot_ns();
	if (task)
		OXS_EVENT_CALLER(e);
	e->op = op;
	e->reason = reason;
	e->family = family;
	e->protocol = protocol;
	__builtin_memcpy(e->addr, addr, 16);
	e->port = port;
	e->sock_type = sock_type;
	oxs_event_submit(e);
}

static __always_inline bool is_v4mapped(const __u32 a[4])
{
	return a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0xffff);
}

static __always_inline bool is_loopback(const __u32 a[4])
{
	if (is_v4mapped(a)) {
		__u32 v4 = bpf_ntohl(a[3]);
		/* 255.255.255.255 reaches this host's own listeners too. */
		return (v4 >> 24) == 127 || v4 == 0 || v4 == 0xffffffff;
	}
	return a[0] == 0 && a[1] == 0 && a[2] == 0 && (a[3] == bpf_htonl(1) || a[3] == 0);
}

/* is_local reports whether a is delivered to this host: loopback by
 * value, or covered by one of the host's local, broadcast or anycast
 * routes. */
static __always_inline bool is_local(const __u32 a[4])
{
	if (is_loopback(a))
		return true;
	struct net_local_key k = {.prefixlen = 128};
	__builtin_memcpy(k.addr, a, 16);
	return bpf_map_lookup_elem(&net_local, &k) != 0;
}

/* guarded_prefixlen returns the key prefixlen an allow entry must reach to
 * admit a metadata or link-local address ("listed explicitly"), 0 for
 * ordinary addresses. */
static __always_inline __u32 guarded_prefixlen(const __u32 a[4])
{
	if (is_v4mapped(a)) {
		if ((bpf_ntohl(a[3]) >> 16) == 0xa9fe) /* 169.254.0.0/16 */
			return 64 + 96 + 16;
		return 0;
	}
	/* 64:ff9b::/96 (NAT64) reaches the IPv4 address in its last word:
	 * a translator on the path must not hand out the metadata service. */
	if (a[0] == bpf_htonl(0x0064ff9b) && a[1] == 0 && a[2] == 0 &&
	    (bpf_ntohl(a[3]) >> 16) == 0xa9fe)
		return 64 + 96 + 16;
	if ((bpf_ntohl(a[0]) & 0xffc00000) == 0xfe800000) /* fe80::/10 */
		return 64 + 10;
	if (a[0] == bpf_htonl(0xfd000ec2) && a[1] == 0 && a[2] == 0 &&
	    a[3] == bpf_htonl(0x254)) /* fd00:ec2::254 */
		return 64 + 128;
	return 0;
}

/* An allow_lookup question, passed by pointer: a global function takes at
 * most five arguments. */
struct net_query {
	__u64 cgid;
	__u32 addr[4];
	__u32 min_prefixlen; /* an entry must be at least this specific */
	__u16 port;
	__u8 static_only;    /* resolver entries (with an expiry) do not count */
	__u8 _pad;
};

/* allow_lookup walks the covering allow entries from the longest prefix
 * down; it returns 0 when one admits the port now, else a reason.
 *
 * A global function: the verifier checks it once, on its own, instead of
 * once for every way each program reaches it. Inlined, its nested loops
 * made the connect, sendmsg and egress programs 250 000 to 425 000
 * verified instructions each (of the 1 000 000 a program may take) and
 * their load a quarter of a second each. */
__attribute__((noinline)) int allow_lookup(const struct net_query *q)
{
	struct net_allow_key key = {};
	__u64 now = bpf_ktime_get_boot_ns();
	__u8 reason = NET_REASON_NOT_ALLOWED;

	if (!q)
		return reason;
	key.prefixlen = 64 + 128;
	key.cgid_hi = bpf_htonl(q->cgid >> 32);
	key.cgid_lo = bpf_htonl((__u32)q->cgid);
	__builtin_memcpy(key.addr, q->addr, 16);

	for (int depth = 0; depth < MAX_PREFIX_WALK; depth++) {
		struct net_allow_val *v = bpf_map_lookup_elem(&net_allow, &key);
		if (!v)
			return reason;
		if (v->prefixlen < q->min_prefixlen)
			return NET_REASON_GUARDED;
		for (int i = 0; i < NET_MAX_RANGES; i++) {
			if (i >= v->nranges)
				break;
			struct net_port_range *r = &v->ranges[i];
			if (q->port < r->first || q->port > r->last) {
				if (reason == NET_REASON_NOT_ALLOWED)
					reason = NET_REASON_PORT;
				continue;
			}
			if (r->expires_ns != 0 && (q->static_only || now >= r->expires_ns)) {
				reason = NET_REASON_EXPIRED;
				continue;
			}
			return 0;
		}
		if (v->prefixlen <= 64)
			return reason;
		key.prefixlen = v->prefixlen - 1;
	}
	return reason;
}

/* allow_query asks allow_lookup about a:port for session cgid. */
static __always_inline __u8 allow_query(__u64 cgid, const __u32 a[4], __u16 port,
					__u32 min_prefixlen, bool static_only)
{
	struct net_query q = {};
	q.cgid = cgid;
	__builtin_memcpy(q.addr, a, 16);
	q.min_prefixlen = min_prefixlen;
	q.port = port;
	q.static_only = static_only;
	return allow_lookup(&q);
}

static __always_inline bool is_dns_listener(const struct net_session *s, const __u32 a[4],
					    __u16 port, __u8 protocol)
{
	if (port == 0)
		return false;
	if (is_v4mapped(a) && a[3] == s->dns4_addr)
		return protocol == IPPROTO_UDP ? port == s->dns4_udp_port
					       : port == s->dns4_tcp_port;
	if (a[0] == s->dns6_addr[0] && a[1] == s->dns6_addr[1] && a[2] == s->dns6_addr[2] &&
	    a[3] == s->dns6_addr[3])
		return protocol == IPPROTO_UDP ? port == s->dns6_udp_port
					       : port == s->dns6_tcp_port;
	return false;
}

/* loopback_owned reports whether the local socket that a:port reaches
 * belongs to session cgid: found the way the stack will find it, so a port
 * that a session closed and someone else re-bound is not the session's. */
static __always_inline bool loopback_owned(void *ctx, __u64 cgid, const __u32 a[4], __u16 port,
					   __u8 protocol, __u16 sport)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *sk;
	__u32 size;

	if (is_v4mapped(a)) {
		t.ipv4.saddr = a[3];
		t.ipv4.daddr = a[3];
		t.ipv4.sport = bpf_htons(sport);
		t.ipv4.dport = bpf_htons(port);
		size = sizeof(t.ipv4);
	} else {
		__builtin_memcpy(t.ipv6.saddr, a, 16);
		__builtin_memcpy(t.ipv6.daddr, a, 16);
		t.ipv6.sport = bpf_htons(sport);
		t.ipv6.dport = bpf_htons(port);
		size = sizeof(t.ipv6);
	}
	if (protocol == IPPROTO_UDP)
		sk = bpf_sk_lookup_udp(ctx, &t, size, BPF_F_CURRENT_NETNS, 0);
	else if (protocol == IPPROTO_TCP)
		sk = bpf_sk_lookup_tcp(ctx, &t, size, BPF_F_CURRENT_NETNS, 0);
	else
		return false;
	if (!sk)
		return false;
	struct net_sk_info *info = bpf_sk_storage_get(&net_sk, sk, 0, 0);
	bool owned = info && info->owner == cgid;
	bpf_sk_release(sk);
	return owned;
}

/* Loopback is judged by the loopback setting, and admitted besides by an
 * allow entry the policy lists for it: a static entry (no resolver expiry,
 * so a name pointed at loopback never opens it) at least as specific as
 * 127.0.0.0/8 or ::1/128, and for the host's own other addresses exactly
 * that address. A listed 127.0.0.2:8080 or 10.0.0.5/32:8080 is a
 * deliberate choice; 0.0.0.0/0 or 10.0.0.0/8 is not a choice about this
 * host. */
#define LOOPBACK_V4_PREFIXLEN (64 + 96 + 8)
#define HOST_PREFIXLEN (64 + 128)

/* other_resolver reports whether a:port is a listener of another session's
 * resolver. Its port is no secret (ss shows it), and a query there would
 * be answered and admitted under that session's policy. */
static __always_inline bool other_resolver(__u64 cgid, const __u32 a[4], __u16 port,
					   __u8 protocol)
{
	struct net_listener_key k = {};
	__builtin_memcpy(k.addr, a, 16);
	k.port = port;
	k.protocol = protocol;
	/* The unspecified address connects to loopback. */
	if (is_v4mapped(a) && a[3] == 0)
		((__u32 *)k.addr)[3] = bpf_htonl(0x7f000001);
	else if (a[0] == 0 && a[1] == 0 && a[2] == 0 && a[3] == 0)
		((__u32 *)k.addr)[3] = bpf_htonl(1);
	__u64 *owner = bpf_map_lookup_elem(&net_resolvers, &k);
	return owner && *owner != cgid;
}

/* judge_local judges a destination on this host. */
static __always_inline __u8 judge_local(void *ctx, __u64 cgid, const struct net_session *s,
					const __u32 a[4], __u16 port, __u8 protocol, __u16 sport)
{
	if (is_dns_listener(s, a, port, protocol))
		return 0;
	if (other_resolver(cgid, a, port, protocol))
		return NET_REASON_RESOLVER;
	if (s->loopback == NET_LOOPBACK_ALL)
		return 0;
	if (s->loopback == NET_LOOPBACK_SESSION &&
	    loopback_owned(ctx, cgid, a, port, protocol, sport))
		return 0;
	__u32 listed = HOST_PREFIXLEN;
	if (is_v4mapped(a) && (bpf_ntohl(a[3]) >> 24) == 127)
		listed = LOOPBACK_V4_PREFIXLEN;
	if (allow_query(cgid, a, port, listed, true) == 0)
		return 0;
	return NET_REASON_LOOPBACK;
}

/* judge returns 0 when the session may reach a:port over protocol; sport
 * is the sender's own port (0 when not bound yet); local says the
 * destination is this host (is_local, or the packet is routed over lo). */
static __always_inline __u8 judge(void *ctx, __u64 cgid, const struct net_session *s,
				  const __u32 a[4], __u16 port, __u8 protocol, __u16 sport,
				  bool local)
{
	if (local)
		return judge_local(ctx, cgid, s, a, port, protocol, sport);
	if (s->mode == NET_MODE_NONE)
		return NET_REASON_POLICY_NONE;
	__u32 guard = guarded_prefixlen(a);
	if (s->mode == NET_MODE_FULL && guard == 0)
		return 0;
	__u8 reason = allow_query(cgid, a, port, guard, false);
	if (guard && reason == NET_REASON_NOT_ALLOWED)
		reason = NET_REASON_GUARDED;
	return reason;
}

static __always_inline void load_addr(struct bpf_sock_addr *ctx, bool v6, __u32 a[4])
{
	if (v6) {
		a[0] = ctx->user_ip6[0];
		a[1] = ctx->user_ip6[1];
		a[2] = ctx->user_ip6[2];
		a[3] = ctx->user_ip6[3];
	} else {
		a[0] = 0;
		a[1] = 0;
		a[2] = bpf_htonl(0xffff);
		a[3] = ctx->user_ip4;
	}
}

static __always_inline void store_addr(struct bpf_sock_addr *ctx, bool v6, const __u32 a[4])
{
	if (v6) {
		ctx->user_ip6[0] = a[0];
		ctx->user_ip6[1] = a[1];
		ctx->user_ip6[2] = a[2];
		ctx->user_ip6[3] = a[3];
	} else {
		ctx->user_ip4 = a[3];
	}
}

static __always_inline void remember_allowed(struct bpf_sock_addr *ctx, const __u32 a[4],
					     __u16 port, bool local)
{
	struct bpf_sock *sk = ctx->sk;
	if (!sk)
		return;
	struct net_sk_info *info =
		bpf_sk_storage_get(&net_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!info)
		return;
	__builtin_memcpy(info->allowed_addr, a, 16);
	info->allowed_port = port;
	info->allowed = 1;
	info->allowed_local = local;
}

/* redirect_dns points a port-53 destination at the session's resolver and
 * remembers the original server for recvmsg. */
static __always_inline int redirect_dns(struct bpf_sock_addr *ctx, const struct net_session *s,
					__u64 cgid, const __u32 a[4], bool v6, __u8 op)
{
	__u8 protocol = ctx->protocol;
	__u32 to[4] = {0, 0, bpf_htonl(0xffff), s->dns4_addr};
	__u16 port = protocol == IPPROTO_UDP ? s->dns4_udp_port : s->dns4_tcp_port;

	/* An IPv6 socket goes to the IPv6 listener even for a mapped server:
	 * an IPV6_V6ONLY socket cannot reach a mapped address. */
	if (v6) {
		__u16 port6 = protocol == IPPROTO_UDP ? s->dns6_udp_port : s->dns6_tcp_port;
		if (port6 != 0) {
			to[0] = s->dns6_addr[0];
			to[1] = s->dns6_addr[1];
			to[2] = s->dns6_addr[2];
			to[3] = s->dns6_addr[3];
			port = port6;
		}
	}
	if (port == 0 || s->mode == NET_MODE_NONE) {
		__u8 reason = s->mode == NET_MODE_NONE ? NET_REASON_POLICY_NONE : NET_REASON_DNS;
		emit(op, reason, cgid, a, DNS_PORT, ctx->family, protocol, ctx->type, true);
		return 0;
	}

	struct bpf_sock *sk = ctx->sk;
	if (sk) {
		struct net_sk_info *info =
			bpf_sk_storage_get(&net_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (info) {
			__builtin_memcpy(info->orig_addr, a, 16);
			info->orig_port = DNS_PORT;
			info->redirected = 1;
			__builtin_memcpy(info->allowed_addr, to, 16);
			info->allowed_port = port;
			info->allowed = 1;
			info->allowed_local = 1; /* the resolver listens on loopback */
		}
	}
	store_addr(ctx, v6, to);
	ctx->user_port = bpf_htons(port);
	return 1;
}

static __always_inline int on_sock_addr(struct bpf_sock_addr *ctx, bool v6, __u8 op)
{
	__u64 cgid;
	struct net_session *s = current_session(&cgid);
	if (!s)
		return 1;

	__u32 a[4];
	load_addr(ctx, v6, a);
	__u16 port = bpf_ntohs((__u16)ctx->user_port);
	__u8 protocol = ctx->protocol;

	if (port == DNS_PORT && s->mode != NET_MODE_FULL &&
	    (protocol == IPPROTO_UDP || protocol == IPPROTO_TCP))
		return redirect_dns(ctx, s, cgid, a, v6, op);

	__u16 sport = 0;
	struct bpf_sock *self = ctx->sk;
	if (self)
		sport = (__u16)self->src_port;
	bool local = is_local(a);
	__u8 reason = judge(ctx, cgid, s, a, port, protocol, sport, local);
	if (reason) {
		emit(op, reason, cgid, a, port, ctx->family, protocol, ctx->type, true);
		return 0;
	}
	if (op == NET_OP_CONNECT)
		remember_allowed(ctx, a, port, local);
	return 1;
}

SEC("cgroup/connect4")
int net_connect4(struct bpf_sock_addr *ctx)
{
	return on_sock_addr(ctx, false, NET_OP_CONNECT);
}

SEC("cgroup/connect6")
int net_connect6(struct bpf_sock_addr *ctx)
{
	return on_sock_addr(ctx, true, NET_OP_CONNECT);
}

SEC("cgroup/sendmsg4")
int net_sendmsg4(struct bpf_sock_addr *ctx)
{
	return on_sock_addr(ctx, false, NET_OP_SENDMSG);
}

SEC("cgroup/sendmsg6")
int net_sendmsg6(struct bpf_sock_addr *ctx)
{
	return on_sock_addr(ctx, true, NET_OP_SENDMSG);
}

/* A reply from the resolver must look like it came from the server the
 * program asked, or stub resolvers drop it as spoofed. */
static __always_inline int on_recvmsg(struct bpf_sock_addr *ctx, bool v6)
{
	struct bpf_sock *sk = ctx->sk;
	if (!sk)
		return 1;
	struct net_sk_info *info = bpf_sk_storage_get(&net_sk, sk, 0, 0);
	if (!info || !info->redirected)
		return 1;
	__u32 a[4];
	load_addr(ctx, v6, a);
	if (bpf_ntohs((__u16)ctx->user_port) != info->allowed_port || a[0] != info->allowed_addr[0] ||
	    a[1] != info->allowed_addr[1] || a[2] != info->allowed_addr[2] ||
	    a[3] != info->allowed_addr[3])
		return 1;
	__u32 orig[4];
	__builtin_memcpy(orig, info->orig_addr, 16);
	store_addr(ctx, v6, orig);
	ctx->user_port = bpf_htons(info->orig_port);
	return 1;
}

SEC("cgroup/recvmsg4")
int net_recvmsg4(struct bpf_sock_addr *ctx)
{
	return on_recvmsg(ctx, false);
}

SEC("cgroup/recvmsg6")
int net_recvmsg6(struct bpf_sock_addr *ctx)
{
	return on_recvmsg(ctx, true);
}

/* own marks sk as the session's; bound says it was bind()-ed there. */
static __always_inline void own(struct bpf_sock *sk, __u64 cgid, bool bound)
{
	struct net_sk_info *info = bpf_sk_storage_get(&net_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!info)
		return;
	info->owner = cgid;
	if (bound)
		info->bound = 1;
}

SEC("cgroup/sock_create")
int net_sock_create(struct bpf_sock *sk)
{
	__u64 cgid;
	struct net_session *s = current_session(&cgid);
	if (!s)
		return 1;
	if (s->mode != NET_MODE_FULL &&
	    (sk->type == SOCK_RAW || sk->protocol == IPPROTO_ICMP ||
	     sk->protocol == IPPROTO_ICMPV6_)) {
		/* Raw sockets forge any packet; ICMP ("ping") sockets carry
		 * data that no port rule can describe. */
		__u32 none[4] = {};
		emit(NET_OP_SOCK_CREATE, NET_REASON_RAW_SOCKET, cgid, none, 0, sk->family,
		     sk->protocol, sk->type, true);
		return 0;
	}
	own(sk, cgid, false);
	return 1;
}

/* post_bind also covers sockets the kernel creates for a session's socket
 * (MPTCP subflows), which sock_create never sees. */
static __always_inline int on_post_bind(struct bpf_sock *sk)
{
	__u64 cgid;
	if (current_session(&cgid))
		own(sk, cgid, true);
	return 1;
}

SEC("cgroup/post_bind4")
int net_post_bind4(struct bpf_sock *sk)
{
	return on_post_bind(sk);
}

SEC("cgroup/post_bind6")
int net_post_bind6(struct bpf_sock *sk)
{
	return on_post_bind(sk);
}

SEC("cgroup_skb/egress")
int net_egress_floor(struct __sk_buff *skb)
{
	__u64 cgid;
	struct net_session *s = skb_session(skb, &cgid);
	if (!s)
		return 1;

	__u32 a[4];
	__u8 protocol;
	__u32 l4;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		__u8 vihl;
		__u32 daddr;
		if (bpf_skb_load_bytes(skb, 0, &vihl, 1) ||
		    bpf_skb_load_bytes(skb, 9, &protocol, 1) ||
		    bpf_skb_load_bytes(skb, 16, &daddr, 4))
			return 0;
		a[0] = 0;
		a[1] = 0;
		a[2] = bpf_htonl(0xffff);
		a[3] = daddr;
		l4 = (vihl & 0xf) * 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (bpf_skb_load_bytes(skb, 6, &protocol, 1) ||
		    bpf_skb_load_bytes(skb, 24, a, 16))
			return 0;
		l4 = 40;
	} else {
		return 1;
	}

	/* Whatever the destination's value, a packet routed over lo stays on
	 * this host: the host's own addresses are loopback. */
	bool local = skb->ifindex == LOOPBACK_IFINDEX || is_local(a);

	if (protocol != IPPROTO_TCP && protocol != IPPROTO_UDP) {
		if (local ? s->loopback == NET_LOOPBACK_ALL
			  : s->mode == NET_MODE_FULL && guarded_prefixlen(a) == 0)
			return 1;
		emit(NET_OP_SKB_EGRESS, NET_REASON_PROTOCOL, cgid, a, 0, 0, protocol, 0, false);
		return 0;
	}

	__be16 ports[2];
	if (bpf_skb_load_bytes(skb, l4, ports, sizeof(ports)))
		return 0;
	__u16 sport = bpf_ntohs(ports[0]);
	__u16 dport = bpf_ntohs(ports[1]);

	struct bpf_sock *sk = skb->sk;
	if (sk)
		sk = bpf_sk_fullsock(sk);
	if (sk) {
		struct net_sk_info *info = bpf_sk_storage_get(&net_sk, sk, 0, 0);
		if (info && info->allowed && info->allowed_port == dport &&
		    info->allowed_local == local && info->allowed_addr[0] == a[0] &&
		    info->allowed_addr[1] == a[1] && info->allowed_addr[2] == a[2] &&
		    info->allowed_addr[3] == a[3])
			return 1;
		/* An accepted connection of a session server: a bound TCP
		 * socket whose connect was never judged cannot have opened a
		 * connection itself (connect, TFO and io_uring are all judged). */
		if (info && protocol == IPPROTO_TCP && info->bound && !info->allowed &&
		    info->owner == cgid)
			return 1;
	}
	__u8 reason = judge(skb, cgid, s, a, dport, protocol, sport, local);
	if (!reason)
		return 1;
	emit(NET_OP_SKB_EGRESS, reason, cgid, a, dport, 0, protocol, 0, false);
	return 0;
}
