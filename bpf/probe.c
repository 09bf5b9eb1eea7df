// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * probe.c: the smallest programs that tell whether this kernel accepts a
 * program type and attach point. They decide nothing: loading and attaching
 * them is the probe; they are detached straight away.
 *
 * Hooks (each allows everything):
 *   lsm/file_open    does BPF-LSM load and attach (loader.ProbeBPFLSM)
 *   cgroup/connect4  do cgroup sock_addr programs (loader.ProbeCgroupSockAddr)
 */
#include "common.h"

char __license[] SEC("license") = "Dual BSD/GPL";

/* BPF-LSM probe: file_open is present in every kernel with BPF-LSM. */
SEC("lsm/file_open")
int BPF_PROG(probe_lsm_file_open, struct file *file, int ret)
{
	return ret;
}

/* cgroup sock_addr probe: admits every connect(). */
SEC("cgroup/connect4")
int probe_connect4(struct bpf_sock_addr *ctx)
{
	return 1;
}
