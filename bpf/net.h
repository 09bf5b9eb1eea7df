/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * net.h: the data shared between the cgroup network programs (net.c) and
 * userspace (package egress). Every struct here is mirrored by a Go type
 * that bpf2go generates, so fields are laid out without implicit padding.
 */
#ifndef OXS_NET_H
#define OXS_NET_H

#include <linux/types.h>

#include "events.h"

/* Session network policy (net_session.mode). */
enum net_mode {
	NET_MODE_NONE = 0,
	NET_MODE_ALLOWLIST = 1,
	NET_MODE_FULL = 2,
};

/* Loopback policy (net_session.loopback). */
enum net_loopback {
	NET_LOOPBACK_NONE = 0,
	NET_LOOPBACK_SESSION = 1,
	NET_LOOPBACK_ALL = 2,
};

/* Which hook produced an event (net_event.op). */
enum net_op {
	NET_OP_CONNECT = 1,
	NET_OP_SENDMSG = 2,
	NET_OP_SOCK_CREATE = 3,
	NET_OP_SKB_EGRESS = 4,
};

/* Why a destination was refused (net_event.reason). */
enum net_reason {
	NET_REASON_POLICY_NONE = 1,   /* policy none: no INET egress at all */
	NET_REASON_NOT_ALLOWED = 2,   /* no allow entry covers the address */
	NET_REASON_PORT = 3,          /* an entry covers the address, not the port */
	NET_REASON_EXPIRED = 4,       /* only expired resolver entries cover it */
	NET_REASON_GUARDED = 5,       /* metadata / link-local, not listed explicitly */
	NET_REASON_LOOPBACK = 6,      /* loopback refused by the loopback policy */
	NET_REASON_RAW_SOCKET = 7,    /* SOCK_RAW or ICMP socket */
	NET_REASON_DNS = 8,           /* port 53 with no resolver for the session */
	NET_REASON_PROTOCOL = 9,      /* egress floor: neither TCP nor UDP */
	NET_REASON_RESOLVER = 10,     /* another session's resolver listener */
};

/* net_sessions value: one per session cgroup id. */
struct net_session {
	__u32 mode;     /* enum net_mode */
	__u32 loopback; /* enum net_loopback */
	/* The session's resolver listeners. Addresses are in network byte
	 * order, ports in host byte order; a zero port means "none". */
	__u32 dns4_addr;
	__u16 dns4_udp_port;
	__u16 dns4_tcp_port;
	__u32 dns6_addr[4];
	__u16 dns6_udp_port;
	__u16 dns6_tcp_port;
};

/*
 * net_allow key. Addresses are always IPv6; IPv4 is stored IPv4-mapped
 * (::ffff:a.b.c.d), so a mapped IPv6 destination is judged as IPv4.
 * prefixlen counts the 64 cgroup-id bits: a rule a.b.c.d/n has
 * prefixlen 64 + 96 + n and can never match another session's key.
 */
struct net_allow_key {
	__u32 prefixlen;
	__u32 cgid_hi; /* big-endian halves: plain bytes for the trie */
	__u32 cgid_lo;
	__u8 addr[16];
};

#define NET_MAX_RANGES 16

struct net_port_range {
	__u16 first; /* inclusive, host byte order */
	__u16 last;
	__u32 _pad;
	__u64 expires_ns; /* CLOCK_BOOTTIME; 0 = never */
};

struct net_allow_val {
	/* The key's prefixlen, so a lookup can continue with the next
	 * shorter covering entry when this one does not admit the port. */
	__u32 prefixlen;
	__u32 nranges;
	struct net_port_range ranges[NET_MAX_RANGES];
};

/*
 * net_local key: a prefix the host delivers locally (IPv4 mapped, prefixlen
 * in the IPv6 space): its local, broadcast and anycast routes, kept by
 * userspace from rtnetlink. Such a destination is judged by the loopback
 * rules whatever its value.
 */
struct net_local_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/*
 * net_resolvers key: a listener of a session's resolver (IPv4 mapped
 * address, host-order port, IPPROTO_TCP/UDP); the value is the owning
 * session's cgroup id. No other session may reach it, loopback = all and
 * explicit allow entries included.
 */
struct net_listener_key {
	__u8 addr[16];
	__u16 port;
	__u8 protocol;
	__u8 _pad;
};

/* One refusal, sent to the shared ring buffer (events.h). */
struct net_event {
	struct oxs_event_header hdr; /* source OXS_SOURCE_NET */
	__u64 time_ns;  /* bpf_ktime_get_boot_ns */
	__u32 pid;      /* tgid */
	__u32 tid;
	__u32 uid;
	__u8 op;        /* enum net_op */
	__u8 reason;    /* enum net_reason */
	__u8 family;    /* AF_INET / AF_INET6 as the socket was created */
	__u8 protocol;  /* IPPROTO_* */
	__u8 addr[16];  /* destination, IPv4 mapped */
	__u16 port;     /* destination port, host byte order */
	__u16 sock_type;
	__u32 _pad;
	char comm[16];
};

#endif
