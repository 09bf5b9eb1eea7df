// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * mkdirdeny.c: a deliberately tiny BPF-LSM policy that refuses mkdir(2)
 * with EPERM for processes whose cgroup is listed in deny_mkdir_cgroups.
 * It proves the whole chain (build, load, attach, per-cgroup lookup,
 * errno to userspace) on a kernel before the real filesystem programs do.
 * Test-only: loaded by loader's tests through loader/internal/mkdirdeny.
 *
 * Hooks:
 *   lsm/path_mkdir  mkdir(2) in a listed cgroup: EPERM, no event
 */
#include "common.h"

char __license[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u64);  /* cgroup v2 id (the cgroup directory's inode number) */
	__type(value, u8); /* unused: presence is the rule */
} deny_mkdir_cgroups SEC(".maps");

SEC("lsm/path_mkdir")
int BPF_PROG(deny_mkdir, const struct path *dir, struct dentry *dentry, umode_t mode, int ret)
{
	/* An earlier LSM already refused: keep its verdict. */
	if (ret != 0)
		return ret;

	u64 cgroup_id = bpf_get_current_cgroup_id();
	if (bpf_map_lookup_elem(&deny_mkdir_cgroups, &cgroup_id))
		return -EPERM;
	return 0;
}
