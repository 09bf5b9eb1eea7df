package launcher

// MountPlan is what the launcher does to its private mount namespace before
// it drops privileges; package landlock plans it from the policy
// (landlock.PlanMounts). Nothing here touches the host's mount table: Apply
// first makes every mount private, so the namespace dies with the session
// and leaves nothing behind.
type MountPlan struct {
	// Protected are existing protected paths, bound read-only onto
	// themselves: writes get EROFS, and unlink/rename of them gets EBUSY
	// because each is a mount point.
	Protected []Inode `json:"protected"`
	// Pinned are directories between a writable root and a protected path
	// (e.g. a repository's .git) bound onto themselves read-write, so they
	// cannot be renamed away and replaced by an unprotected copy.
	Pinned []string `json:"pinned"`
	// Masked are deny-read entries Landlock cannot exclude (inside
	// writable roots, matching a deny-read glob, or every existing anchor
	// in external-sandbox mode), hidden under an empty read-only tmpfs
	// (directories) or a read-only /dev/null (files).
	Masked []string `json:"masked"`
	// ReadOnly are kernel interfaces a session must not write: /sys (with
	// cgroupfs, bpffs, securityfs below it), /proc/sys, and any cgroup or
	// bpf mount elsewhere.
	ReadOnly []string `json:"read_only"`
	// ReadOnlyView makes every mount read-only except Writable (see
	// applyReadOnlyView): how the Landlock path refuses the metadata
	// changes Landlock has no right for (chmod, chown, utimes).
	ReadOnlyView bool `json:"read_only_view,omitempty"`
	// Writable are the directories that stay writable in the read-only
	// view (landlock.WritableDirs and the directories of writable files).
	Writable []string `json:"writable,omitempty"`
	// PrivateShm puts a tmpfs of the session's own on /dev/shm (see
	// landlock.PlanMounts); ShmReadOnly makes it read-only (read-only mode). The
	// tmpfs is NewPrivateShm's, made by the supervisor: ShmFD is its
	// descriptor in the process that applies the plan. The launcher sets
	// it to the descriptor that came with its spec (SendSpec), whatever
	// the spec said; a plan applied by another process (a test's child)
	// names it.
	PrivateShm  bool `json:"private_shm,omitempty"`
	ShmReadOnly bool `json:"shm_read_only,omitempty"`
	ShmFD       int  `json:"shm_fd,omitempty"`
}

// Inode is an existing path with the identity it had when the plan was
// made: Apply refuses to bind over one that changed since (a zero Ino
// skips the check).
type Inode struct {
	Path string `json:"path"`
	// Dev is st_dev as userspace sees it (unix.Stat_t.Dev).
	Dev uint64 `json:"dev,omitempty"`
	Ino uint64 `json:"ino,omitempty"`
}
