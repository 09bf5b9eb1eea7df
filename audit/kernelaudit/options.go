package kernelaudit

import (
	"time"

	"github.com/openoxide/oxsupervise/cgroup"
)

// Options configure a Reader.
type Options struct {
	// SessionOfPID is consulted first to attribute a pid to a session: the
	// producer knows its sessions' pids even after they exited.
	SessionOfPID func(pid int) (string, bool)
	// SessionOfAuditSession attributes a record by its kernel audit
	// session id (ses=), when the pid is gone: a record with no Landlock
	// domain (seccomp) has nothing else that outlives its process.
	SessionOfAuditSession func(ses uint32) (string, bool)
	// Cgroup says where session groups live, for attribution through
	// /proc/PID/cgroup; the zero value is the default layout.
	Cgroup cgroup.Config
	// FlushAfter is how long the records of one event are awaited when no
	// EOE record ends it (default 200ms).
	FlushAfter time.Duration
	// KeepUnattributed also emits refusals of processes in no session
	// (other Landlock users on the machine); by default they are counted
	// in Stats and dropped.
	KeepUnattributed bool
	// RestoreOnClose disables audit again on Close if Open enabled it. See
	// the package documentation for why this is off by default.
	RestoreOnClose bool
	// receiveBuffer overrides the socket buffer size (tests provoke
	// overflows with a small one).
	receiveBuffer int
	// MinBacklogLimit raises the kernel's audit backlog_limit to at least
	// this many records (default 8192, auditd's usual setting; negative
	// leaves it alone). Landlock logs from atomic context, so a full
	// backlog drops its records at once; the kernel default of 64 loses
	// most of a burst. Raising a limit never hurts another consumer.
	MinBacklogLimit int
	// DrainTimeout bounds how long Run keeps reading after its context
	// ends (default 15s). See Run.
	DrainTimeout time.Duration
}

// Stats count what a Reader saw.
type Stats struct {
	Messages     uint64 // audit records received
	Unparsable   uint64 // records that did not parse
	Denials      uint64 // audit.Records emitted for refusals
	Unattributed uint64 // refusals no session claimed
	Overflows    uint64 // records lost to socket overflows, reported as events_lost
	KernelLost   uint64 // increase of the kernel's lost counter, reported as events_lost
	Unread       uint64 // records left unread when a drain timed out, reported as events_lost
	// MarkerDrains counts drains that ended when the reader's own marker
	// came back (exact); the others ended on a quiet socket and an empty
	// backlog, or on DrainTimeout.
	MarkerDrains uint64
}
