// Package kernelaudit turns the kernel audit subsystem's Landlock records
// into audit.Records: it reads the NETLINK_AUDIT multicast group (the
// read-only log feed that coexists with auditd), groups the records of one
// kernel event by their audit(TIME:SERIAL) stamp, and attributes each
// Landlock refusal to an oxsupervise session.
//
// Record types used: 1423 LANDLOCK_ACCESS (one per refused access: domain,
// blockers, object), 1424 LANDLOCK_DOMAIN (domain allocation with the
// creating pid, and deallocation), 1300 SYSCALL (acting pid, ppid, uid,
// exe, comm, exit), 1327 PROCTITLE (argv) and 1320 EOE (end of event).
// SYSCALL, PROCTITLE and EOE only exist when the acting task has a syscall
// audit context, which an auditd rule such as "-a task,never" (Debian's
// default) removes; then every record is its own event, flushed after a
// short timeout, and the pid comes from the domain's allocation record.
//
// Attribution, first match wins: the producer's pid→session map (processes
// may be gone by the time the record is read), the pid's cgroup
// (<cgroup2>/oxsupervise/<id>), then the session of the pid that created
// the Landlock domain — every process carrying a session's domain descends
// from the session's launcher.
//
// Loss accounting: a refusal is either written as a record or counted in
// an events_lost record, never dropped unseen. The kernel drops records in
// two places, both counted: its backlog (audit_status.lost, global to the
// machine) and this socket's receive buffer (the Drops column of
// /proc/net/netlink). Both count kernel records, not refusals, and a
// refusal is several records (ACCESS, SYSCALL, PROCTITLE, EOE), and the
// lost counter includes other audit users' records: so events_lost is an
// upper bound, and records plus events_lost can exceed the refusals made.
// Exact per-refusal counts of dropped records are impossible from
// userspace: the kernel does not say what it dropped. When Run's context
// ends, Run drains the kernel backlog and the socket before returning
// (records of a flood are still in flight when the session's last process
// exits). The drain knows when it is done: the reader writes a marker
// (an AUDIT_TRUSTED_APP message "oxsupervise-audit-drain=PID-NONCE") and
// stops when the marker comes back, since kauditd delivers in queue order;
// on a machine that runs auditd, that is one line in its log per session.
// What a bounded drain could not read becomes an events_lost record too.
//
// Sharing: a long-lived supervisor reads the feed once for all its
// sessions (Hub: the daemon for every session it runs, a run for its
// session and every nested session it serves). Each session subscribes
// with what identifies its processes beyond their cgroup (its launcher's
// pid, its audit session) and is handed only the refusals attributed to
// it; loss records go to every session subscribed when the loss was seen.
// A session's end drains exactly on the shared stream: its own marker,
// written once its last process is gone, arrives after every record of
// the session, whose events still waiting for more records are flushed
// then, while the other sessions' keep waiting.
//
// Enabling audit: Landlock only logs when audit is enabled, so Open sets
// enabled=1 when it is 0. It does not turn it off again by default: several
// sessions, the daemon and auditd may rely on it concurrently, and whoever
// disabled it last would silently cut the others' Landlock records. Set
// Options.RestoreOnClose only when this process is known to be the sole
// consumer (a test).
package kernelaudit
