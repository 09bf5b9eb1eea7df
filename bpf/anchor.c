// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * anchor.c: tells userspace how the kernel itself names the inodes it
 * anchors filesystem rules on.
 *
 * fs.c keys its anchors by the dentry's inode number and its superblock's
 * s_dev, exactly as the d_parent walk meets them. stat(2) does not always
 * report those: overlayfs with layers on different filesystems reports a
 * directory's st_ino from the underlying layer, btrfs reports a
 * subvolume's anonymous st_dev. A rule keyed by stat's numbers would never
 * match there. Userspace opens every anchor, then reads this task_file
 * iterator over its own file table: for each fd, the (s_dev, i_ino) of
 * f_path.dentry->d_inode, the inode the walk will see.
 *
 * Hooks (it decides nothing):
 *   iter/task_file  one anchor_record per open file of anchor_tgid
 */
#include "common.h"

char __license[] SEC("license") = "Dual BSD/GPL";

/* Set by userspace before loading: only its own file table is read. */
volatile const __u32 anchor_tgid = 0;

struct bpf_iter_meta {
	void *seq;
} __attribute__((preserve_access_index));

struct task_struct___anchor {
	pid_t tgid;
} __attribute__((preserve_access_index));

struct bpf_iter__task_file {
	struct bpf_iter_meta *meta;
	struct task_struct___anchor *task;
	__u32 fd;
	struct file *file;
} __attribute__((preserve_access_index));

/* One record per fd; mirrored by loader.AnchorRecord. */
struct anchor_record {
	__u64 ino;
	__u32 fd;
	__u32 dev; /* kernel s_dev: major << 20 | minor */
};

/* Keep the record type in the BTF for bpf2go. */
const struct anchor_record *unused_anchor_record __attribute__((unused));

SEC("iter/task_file")
int anchor_files(struct bpf_iter__task_file *ctx)
{
	struct task_struct___anchor *task = ctx->task;
	struct file *file = ctx->file;
	if (!task || !file || task->tgid != anchor_tgid)
		return 0;
	struct dentry *d = file->f_path.dentry;
	struct inode *inode = d->d_inode;
	if (!inode)
		return 0;
	struct anchor_record rec = {
		.ino = inode->i_ino,
		.fd = ctx->fd,
		.dev = d->d_sb->s_dev,
	};
	bpf_seq_write(ctx->meta->seq, &rec, sizeof(rec));
	return 0;
}
