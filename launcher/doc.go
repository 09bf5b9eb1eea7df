// Package launcher is the session launcher: the process the supervisor
// starts inside a session's cgroup and private mount (and network)
// namespace, which builds the session's boundary on itself and execs the
// command. It owns the kernel-facing half of the layers run puts on a
// session: applying the mount plan (read-only view, protected binds,
// masks, the private /dev/shm), loading and enforcing the Landlock
// ruleset, dropping capabilities and switching user, installing the
// seccomp filter, opening the kernel audit session, bringing up loopback,
// waiting at the exec gate and closing inherited descriptors. Deciding
// any of it is not its business: package landlock plans the Ruleset and
// MountPlan from the policy, package session fills the Spec, and the
// launcher does what the Spec says, in one thread, then execs.
//
// The launcher is its own small program, cmd/oxsupervise-launch, so that
// a session's start pays the start-up of a program linking only the
// standard library and golang.org/x/sys, not the whole supervisor's. Keep
// it so: this package imports nothing of oxsupervise that imports policy
// or any third-party module (a test checks the program's dependencies).
// Without that program installed the supervisor re-executes itself with
// Verb, which runs the same Main.
package launcher
