// Package session owns the lifetime of oxsupervise sessions on Linux: it
// builds the layers package planner decided for a policy and refuses to
// start when one the plan requires cannot be built (fail closed), creates
// the session (id, cgroup v2
// group, registry entry), starts the command through a launcher that is
// born inside the session cgroup and a private mount namespace, and tears
// everything down when the command exits. It also confines running process
// trees (Attach) and lists and stops sessions.
//
// The launcher is package launcher's program, cmd/oxsupervise-launch,
// installed beside oxsupervise (internal/companion finds it), or without
// one this binary re-executed with the hidden verb LauncherVerb
// (launcherCommand decides). Keeping it a separate process
// (rather than doing the setup in the supervisor) means the supervisor never
// runs confined, and nothing of the command ever runs unconfined: the
// launcher execs the command only after every layer is in place. Nothing
// it is given at fork depends on the session: its spec brings the
// command's stdio and private /dev/shm (launcher.SendSpec), so a long-lived
// supervisor can start it ahead of the request, in a session group of its
// own (Slot, slot_linux.go), which Run claims through RunOptions.Slots. A
// standalone run makes its one slot the same way at its start, while it
// resolves the policy and opens its host (SlotAhead, slotahead_linux.go).
//
// A session has one audit sink: Run opens the policy's log once
// (audit_linux.go) and hands it to every layer in SessionInfo.Audit; the
// layers' refusals pass their own flood control into it
// (layeraudit_linux.go). Attach's caller passes the sink it keeps open for
// as long as the layers live (AttachOptions.Audit).
//
// A supervisor killed with SIGKILL cannot clean up. The command itself dies
// with it (parent-death signal, re-armed after the launcher changes user),
// but processes it forked stay in the session: still confined (cgroup,
// Landlock, mount and network namespaces), not killed. List shows such a
// session as "orphaned"; Stop, or a daemon's start (which stops run
// sessions whose supervisor is gone), ends it.
package session
