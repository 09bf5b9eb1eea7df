// Package cgroup owns the cgroup v2 side of a session: it finds the cgroup2
// mount through mountinfo (unified, hybrid or no cgroup2 at all), creates one
// group per session under the supervisor's subtree
// (<cgroup2 mount>/<parent>/<session-id>), applies the limits the cgroup2
// controllers allow and reports every limit it could not apply, moves
// processes in, freezes, thaws, kills and removes the group
// (cgroup_linux.go), and waits on cgroup.events for it to freeze, empty or
// go: Group.WaitEnd is the one wait for a session's end, for the CLI and
// the daemon alike (events_linux.go).
//
// It also provides the process-tree primitives `attach` builds its
// freeze/move/re-scan loop on: the cgroup of a pid, the session a pid belongs
// to, a pid's threads and its descendants (proctree_linux.go).
//
// The group's cgroup id (the inode number of its directory) is what
// bpf_get_current_cgroup_id returns for tasks inside it; BPF maps are keyed by
// it.
package cgroup
