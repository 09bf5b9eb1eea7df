package cgroup

import "fmt"

// Config says where session groups live.
type Config struct {
	// Mount is the cgroup2 mount point; "" finds it through /proc/self/mountinfo.
	Mount string
	// Parent is the group, relative to the cgroup2 mount, that holds the
	// session groups; "" means DefaultParent.
	Parent string
}

// Limits are the resource limits of a session group; zero means "no limit".
type Limits struct {
	PidsMax   int64 // pids.max
	MemoryMax int64 // memory.max, bytes
}

// LimitWarning reports one limit that was requested but could not be applied.
// Callers must show it: a limit is never dropped silently.
type LimitWarning struct {
	Limit      string `json:"limit"`      // the cgroup file, e.g. "pids.max"
	Value      int64  `json:"value"`      // the requested value
	Controller string `json:"controller"` // e.g. "pids"
	Reason     string `json:"reason"`
}

func (w LimitWarning) String() string {
	return fmt.Sprintf("%s=%d not applied: %s", w.Limit, w.Value, w.Reason)
}

// Group is one session's cgroup v2 group.
type Group struct {
	ID string
	// Path is the group's directory in the cgroup2 filesystem.
	Path string
	// CgroupID is the inode number of Path: the value bpf_get_current_cgroup_id
	// returns for tasks in the group.
	CgroupID uint64
	// Warnings lists the limits NewSession could not apply.
	Warnings []LimitWarning

	mount string // cgroup2 mount point
	rel   string // Path relative to mount, with a leading "/"
}

// End says how WaitEnd's wait ended.
type End int

const (
	// Emptied: no live task is left in the group or below it.
	Emptied End = iota + 1
	// Removed: the group directory no longer exists.
	Removed
)
