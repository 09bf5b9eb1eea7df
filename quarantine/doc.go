// Package quarantine owns the Landlock path's answer to protected names
// created during a session (DESIGN §9). Landlock and bind mounts protect
// only entries that exist when a session starts; a `.claude/settings.json`,
// `.envrc` or a new repository's `.git/hooks` made during the session
// would run code outside the boundary the next time the user opens the
// project. Without BPF-LSM nothing refuses such a name, so the supervisor
// watches the writable roots with fanotify (FAN_REPORT_DFID_NAME,
// FAN_CREATE|FAN_MOVED_TO, filesystem marks) and moves every protected
// entry a session process creates (or renames into place) out of the
// workspace into DefaultDir/<session>/<original path>, within
// milliseconds, each move reported for the audit log.
//
// The guarantee is after the fact, and stated as such by `doctor` and
// `run`: between its creation and the move, the entry exists, and the
// session itself may use it (still confined). What the guarantee covers is
// the user: when the session ends, Close has stopped the watch (every
// session process is gone by then), re-checked what it deferred and, when
// the kernel reported a queue overflow or a root could not be watched,
// walked the roots; no protected entry the session created is left where
// it takes effect. The entries of policy.ProtectedPattern.CheckedAtEnd
// patterns are deferred to that check rather than moved at once, because
// git writes them for normal work (`git worktree add`, submodules): a
// `.git` file, kept when its `gitdir:` names a directory below worktrees/
// or modules/ of a `.git` that existed before the session and whose config
// the session could not write, and a worktree's `commondir`, kept when it
// names its own `.git`. The check reads each below its root without
// following a symlink, and only a regular file passes.
//
// The BPF-LSM path uses the same check (StartReported): there the kernel
// refuses every protected name but those, lets the session create them
// and reports each; nothing watches the roots, and Close walks them only
// when a report went missing or an entry reported is no longer where it
// was made (the directory above it was renamed).
//
// Attribution: an event's pid is in the session when its cgroup is the
// session's. A pid that has exited before the event is read (a `mkdir`
// run by a shell) cannot be looked up; such entries are treated as the
// session's (fail closed: the move is reported and reversible by hand).
//
// Matching protected names is policy's (Compiled.ProtectedMatch); this
// package only decides when to look and where entries go.
package quarantine
