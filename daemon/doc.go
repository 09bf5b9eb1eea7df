// Package daemon owns the oxsupervise supervisor daemon: an HTTP+JSON API on
// a Unix socket whose every request is authorized by the kernel-reported
// credentials of the connecting process (SO_PEERCRED, SO_PEERPIDFD), never
// by anything the client claims. It creates sessions for unprivileged users
// (policy loaded with the user's own file access and clamped by managed
// policy on the daemon side), confines their processes, lists and stops
// sessions, answers permission checks, and runs approved commands outside a
// session (the escape hatch of DESIGN §2). It also has the client the CLI
// uses when the daemon is running.
//
// The enforcement layers (cgroup BPF network rules, BPF-LSM filesystem
// rules where usable) live in an enforcement host (package host) the
// daemon opens once at start, pinned as a new generation (host.Generations)
// so that a crash leaves attach sessions confined, and applied to every
// session it creates or attaches. Which layers a session gets is package
// planner's decision, as for the standalone CLI: a layer that cannot be
// built is logged, and its sessions get the plan's fallback or a refusal,
// never a silently weaker boundary.
//
// File descriptors (a client's stdin, stdout and stderr) travel as
// SCM_RIGHTS ancillary data on the bytes of the request that needs them;
// see docs/daemon.md for the wire protocol.
package daemon
