/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * events.h: the one ring buffer every oxsupervise program reports refusals
 * in (DESIGN §5), the per-CPU count of reservations that failed, and the
 * per-session flood control in front of it.
 *
 * Every object that reports (fs.c, self.c, netfamily.c, net.c, roview.c) declares
 * these maps; userspace (package audit/bpfring) creates them once and
 * hands the same maps to every collection, so the filesystem and network
 * programs write to one stream with one loss counter. Every event starts with struct oxs_event_header, which tells
 * userspace whose record it is before it decodes the rest.
 *
 * Include after the headers that define __u32/__u64 and the libbpf map
 * macros (common.h, or linux/bpf.h with bpf/bpf_helpers.h).
 */
#ifndef OXS_EVENTS_H
#define OXS_EVENTS_H

/* Which programs produced an event (oxs_event_header.source). */
enum oxs_source {
	OXS_SOURCE_FS = 1,  /* BPF-LSM programs (fs.c, self.c, netfamily.c) */
	OXS_SOURCE_NET = 2, /* cgroup network programs (net.c) */
	OXS_SOURCE_ROVIEW = 3, /* EROFS of the read-only view (roview.c) */
	OXS_SOURCES = 4,    /* bound of the values above: oxs_events_lost size */
};

/* The first bytes of every record in oxs_events. */
struct oxs_event_header {
	__u32 source;     /* enum oxs_source */
	__u32 _pad;
	__u64 cgroup_id;  /* the session's cgroup v2 id */
	__u64 suppressed; /* the session's oxs_flood.suppressed when sent */
};

/* oxs_flood key: one bucket per session and source. */
struct oxs_flood_key {
	__u64 cgroup_id;
	__u32 source;
	__u32 _pad;
};

/*
 * oxs_flood value: a GCRA token bucket, so that one session's flood cannot
 * crowd the others' events out of the ring buffer. Userspace
 * writes interval_ns and burst_ns when a session starts and reads sent
 * and suppressed when it ends: the session's refusals are exactly the
 * records it read plus suppressed plus what was sent but never read.
 * A session may emit burst_ns / interval_ns events at once and one per
 * interval_ns after that; interval_ns 0 turns the control off (events
 * are still counted).
 */
struct oxs_flood_bucket {
	__u64 interval_ns;
	__u64 burst_ns;
	__u64 tat;        /* theoretical arrival time, ns (bpf_ktime_get_ns) */
	__u64 suppressed; /* refusals not sent because of the bucket */
	__u64 sent;       /* events submitted to the ring buffer */
};

/* Sized by userspace (audit.kernel_buffer_kib); this is only the default. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} oxs_events SEC(".maps");

/* Failed reservations (ring buffer full), per CPU and source. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OXS_SOURCES);
	__type(key, __u32);
	__type(value, __u64);
} oxs_events_lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct oxs_flood_key);
	__type(value, struct oxs_flood_bucket);
} oxs_flood SEC(".maps");

/* Keep the shared types in the BTF for bpf2go. */
const struct oxs_event_header *unused_oxs_event_header __attribute__((unused));
const struct oxs_flood_key *unused_oxs_flood_key __attribute__((unused));
const struct oxs_flood_bucket *unused_oxs_flood_bucket __attribute__((unused));

/*
 * oxs_event_reserve_limited returns room for one event of size bytes from
 * a session, its header filled in, or NULL when the session's bucket holds
 * it back (counted as suppressed; only when limited) or the ring buffer is
 * full (counted in oxs_events_lost). Concurrent CPUs may race on tat, so
 * the rate is approximate; the counts are atomic, so they are exact. A
 * session without a bucket is neither limited nor counted. Unlimited is
 * for a record the session cannot do without (an entry it was let create
 * on the condition that userspace hears of it), whose caller refuses when
 * this returns NULL. One function for both, with limited a value: two
 * inlined reservations merged into one pointer lose the verifier's track
 * of which was checked for NULL.
 */
static __always_inline void *oxs_event_reserve_limited(__u64 cgroup_id, __u32 source, __u64 size, bool limited)
{
	struct oxs_flood_key key = {.cgroup_id = cgroup_id, .source = source};
	struct oxs_flood_bucket *f = bpf_map_lookup_elem(&oxs_flood, &key);
	__u64 suppressed = 0;
	if (f && f->interval_ns && limited) {
		__u64 now = bpf_ktime_get_ns();
		__u64 tat = f->tat;
		if (tat < now)
			tat = now;
		if (tat - now > f->burst_ns) {
			__sync_fetch_and_add(&f->suppressed, 1);
			return NULL;
		}
		f->tat = tat + f->interval_ns;
	}
	if (f)
		suppressed = f->suppressed;
	struct oxs_event_header *h = bpf_ringbuf_reserve(&oxs_events, size, 0);
	if (!h) {
		__u32 idx = source;
		__u64 *lost = bpf_map_lookup_elem(&oxs_events_lost, &idx);
		if (lost)
			(*lost)++;
		return NULL;
	}
	h->source = source;
	h->_pad = 0;
	h->cgroup_id = cgroup_id;
	h->suppressed = suppressed;
	return h;
}

/*
 * OXS_EVENT_CALLER fills what every event says of the task that made the
 * call: pid, tid, uid and comm. A macro because the event structs differ
 * (fs_event, net_event, roview_event) while these fields' names do not.
 */
#define OXS_EVENT_CALLER(e)                                          \
	do {                                                         \
		__u64 oxs_pid_tgid = bpf_get_current_pid_tgid();      \
		(e)->pid = oxs_pid_tgid >> 32;                       \
		(e)->tid = (__u32)oxs_pid_tgid;                      \
		(e)->uid = (__u32)bpf_get_current_uid_gid();         \
		bpf_get_current_comm((e)->comm, sizeof((e)->comm));  \
	} while (0)

/* oxs_event_reserve is oxs_event_reserve_limited for a refusal: limited. */
static __always_inline void *oxs_event_reserve(__u64 cgroup_id, __u32 source, __u64 size)
{
	return oxs_event_reserve_limited(cgroup_id, source, size, true);
}

/* oxs_event_submit hands an event from oxs_event_reserve to userspace. */
static __always_inline void oxs_event_submit(void *event)
{
	struct oxs_event_header *h = event;
	struct oxs_flood_key key = {.cgroup_id = h->cgroup_id, .source = h->source};
	bpf_ringbuf_submit(event, 0);
	struct oxs_flood_bucket *f = bpf_map_lookup_elem(&oxs_flood, &key);
	if (f)
		__sync_fetch_and_add(&f->sent, 1);
}

#endif /* OXS_EVENTS_H */
