/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * common.h: the one header every oxsupervise BPF program includes.
 *
 * Instead of a generated 130k-line vmlinux.h it declares only the kernel
 * types the programs touch. Kernel-internal structs carry
 * preserve_access_index, so every field access becomes a CO-RE relocation
 * that libbpf/cilium-ebpf resolves against the running kernel's BTF: the
 * field order and the set of fields here do not need to match any kernel,
 * only the field names and kinds do. Add a field here when a program needs
 * it; never copy a whole kernel struct.
 *
 * UAPI structs (program contexts such as bpf_sock_addr) are stable ABI and
 * are declared exactly as in include/uapi/linux/bpf.h, without
 * preserve_access_index: the verifier rewrites their accesses itself.
 */
#ifndef OXS_COMMON_H
#define OXS_COMMON_H

typedef unsigned char __u8;
typedef signed char __s8;
typedef unsigned short __u16;
typedef short __s16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u32 __wsum;

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;
#define true 1
#define false 0

/* Kernel scalar typedefs used in hook signatures (x86_64 and arm64 agree). */
typedef __u16 umode_t;
typedef __u32 dev_t;
typedef int pid_t;
typedef unsigned int fmode_t;
typedef long long loff_t;
typedef __u32 uid_t;
typedef __u32 gid_t;
typedef struct { uid_t val; } kuid_t;
typedef struct { gid_t val; } kgid_t;

#define NULL ((void *)0)

/* errno values the programs return (negated), see include/uapi/asm-generic/errno-base.h. */
#define EPERM 1
#define ENOENT 2
#define EACCES 13
#define ELOOP 40

/* Subset of enum bpf_map_type (include/uapi/linux/bpf.h); values are ABI. */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LPM_TRIE = 11,
	BPF_MAP_TYPE_RINGBUF = 27,
};

/* Map update flags. */
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define BPF_EXIST 2

/* Map creation flags. */
#define BPF_F_NO_PREALLOC (1U << 0)

/* Program contexts (UAPI, exact layout). */
#define __bpf_md_ptr(type, name) \
	union {                  \
		type name;       \
		__u64 : 64;      \
	} __attribute__((aligned(8)))

struct bpf_sock {
	__u32 bound_dev_if;
	__u32 family;
	__u32 type;
	__u32 protocol;
	__u32 mark;
	__u32 priority;
	__u32 src_ip4;
	__u32 src_ip6[4];
	__u32 src_port;
	__be16 dst_port;
	__u16 : 16;
	__u32 dst_ip4;
	__u32 dst_ip6[4];
	__u32 state;
	__s32 rx_queue_mapping;
};

struct bpf_sock_addr {
	__u32 user_family;
	__u32 user_ip4;
	__u32 user_ip6[4];
	__u32 user_port;
	__u32 family;
	__u32 type;
	__u32 protocol;
	__u32 msg_src_ip4;
	__u32 msg_src_ip6[4];
	__bpf_md_ptr(struct bpf_sock *, sk);
};

struct bpf_flow_keys;

struct __sk_buff {
	__u32 len;
	__u32 pkt_type;
	__u32 mark;
	__u32 queue_mapping;
	__u32 protocol;
	__u32 vlan_present;
	__u32 vlan_tci;
	__u32 vlan_proto;
	__u32 priority;
	__u32 ingress_ifindex;
	__u32 ifindex;
	__u32 tc_index;
	__u32 cb[5];
	__u32 hash;
	__u32 tc_classid;
	__u32 data;
	__u32 data_end;
	__u32 napi_id;
	__u32 family;
	__u32 remote_ip4;
	__u32 local_ip4;
	__u32 remote_ip6[4];
	__u32 local_ip6[4];
	__u32 remote_port;
	__u32 local_port;
	__u32 data_meta;
	__bpf_md_ptr(struct bpf_flow_keys *, flow_keys);
	__u64 tstamp;
	__u32 wire_len;
	__u32 gso_segs;
	__bpf_md_ptr(struct bpf_sock *, sk);
	__u32 gso_size;
	__u8 tstamp_type;
	__u32 : 24;
	__u64 hwtstamp;
};

/*
 * Kernel-internal types. Only the fields the programs read; CO-RE
 * relocates each access against the running kernel's BTF.
 */
#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct qstr {
	union {
		struct {
			u32 hash;
			u32 len;
		};
		u64 hash_len;
	};
	const unsigned char *name;
};

struct super_block {
	dev_t s_dev;
	unsigned long s_magic;
};

struct inode {
	umode_t i_mode;
	kuid_t i_uid;
	kgid_t i_gid;
	unsigned int i_flags;
	unsigned long i_ino;
	struct super_block *i_sb;
	unsigned int i_nlink;
};

struct dentry {
	struct dentry *d_parent;
	struct qstr d_name;
	struct inode *d_inode;
	struct super_block *d_sb;
};

struct vfsmount {
	struct dentry *mnt_root;
	struct super_block *mnt_sb;
	int mnt_flags;
};

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
};

struct file {
	struct path f_path;
	struct inode *f_inode;
	unsigned int f_flags;
	fmode_t f_mode;
};

struct cred {
	kuid_t uid;
	kgid_t gid;
	kuid_t euid;
	kgid_t egid;
};

struct task_struct {
	pid_t pid;
	pid_t tgid;
	const struct cred *cred;
	const struct cred *real_cred;
	struct task_struct *real_parent;
	char comm[16];
};

struct linux_binprm {
	struct file *file;
	const char *filename;
	const char *interp;
};

struct iattr {
	unsigned int ia_valid;
	umode_t ia_mode;
	loff_t ia_size;
};

#pragma clang attribute pop

/* File mode bits (include/linux/fs.h), used to tell opens for write. */
#define FMODE_READ ((fmode_t)0x1)
#define FMODE_WRITE ((fmode_t)0x2)
#define O_TRUNC 00001000

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#endif /* OXS_COMMON_H */
