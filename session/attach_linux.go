//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/openoxide/oxsupervise/internal/procfs"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/planner"
)

// pfKthread is PF_KTHREAD in include/linux/sched.h.
const pfKthread = 0x00200000

// CheckAttachable refuses pids attach must not touch, with a clear reason:
// a caller checks them before anything else, so that a wrong pid is
// reported as such (Attach checks again as it moves the tree).
func CheckAttachable(opts AttachOptions) error {
	pid := opts.PID
	if pid <= 0 {
		return fmt.Errorf("--pid %d: not a process id", pid)
	}
	st, err := procfs.ReadStat(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pid %d: no such process", pid)
	}
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	if pid == 1 {
		return fmt.Errorf("pid 1 is the init process: it cannot be confined")
	}
	if st.Flags&pfKthread != 0 || st.PPID == 2 && pid != 2 || pid == 2 {
		return fmt.Errorf("pid %d is a kernel thread: it cannot be confined", pid)
	}
	for p := os.Getpid(); p > 1; {
		if p == pid {
			if p == os.Getpid() {
				return fmt.Errorf("pid %d is the supervisor itself", pid)
			}
			return fmt.Errorf("pid %d is an ancestor of the supervisor: attaching it would confine the supervisor itself", pid)
		}
		s, err := procfs.ReadStat(p)
		if err != nil {
			break
		}
		p = s.PPID
	}
	if id, ok, err := cgroup.SessionOf(opts.Cgroup, pid); err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	} else if ok {
		return fmt.Errorf("pid %d is already in session %s", pid, id)
	}
	status, err := procfs.ReadStatus(pid)
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	ruid, euid := status.UID[procfs.Real], status.UID[procfs.Effective]
	if (ruid != opts.CallerUID || euid != opts.CallerUID) && !opts.AllowOtherUser {
		return fmt.Errorf("pid %d belongs to uid %d, not to the calling user (uid %d); pass --allow-other-user as root to confine it anyway",
			pid, euid, opts.CallerUID)
	}
	return nil
}

// Attach confines a running process tree: it creates a frozen session
// group, moves the pid and every descendant (whole thread groups) into it,
// re-scans until a scan finds nothing left outside, then thaws. A process
// moved into a frozen group freezes, and a child forked after its parent
// moved is born inside the group, so the re-scan converges. On failure
// every moved process goes back to where it was and the group is removed.
func Attach(ctx context.Context, opts AttachOptions) (*Entry, error) {
	warn := warnOrDiscard(opts.Warn)
	if err := CheckAttachable(opts); err != nil {
		return nil, err
	}
	lp, err := decide(planner.Attach, opts.Plan, opts.Policy, planner.Options{NetworkOnly: opts.NetworkOnly}, opts.Unavailable, opts.Layers)
	if err != nil {
		return nil, err
	}
	for _, w := range lp.Warnings {
		fmt.Fprintf(warn, "oxsupervise attach: warning: %s\n", w)
	}
	id, err := NewID()
	if err != nil {
		return nil, err
	}
	group, err := cgroup.NewSession(opts.Cgroup, id, cgroup.Limits{
		PidsMax: opts.Policy.Limits.PidsMax, MemoryMax: opts.Policy.Limits.MemoryMax,
	})
	if err != nil {
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	for _, w := range group.Warnings {
		fmt.Fprintf(warn, "oxsupervise: warning: limit %s\n", w)
	}
	undoLayers, err := applyLayers(ctx, opts.Layers, SessionInfo{ID: id, CgroupPath: group.Path, CgroupID: group.CgroupID, Policy: opts.Policy, Audit: opts.Audit})
	if err != nil {
		group.Remove(context.Background())
		return nil, err
	}
	if err := group.Freeze(ctx); err != nil {
		undoLayers(context.Background())
		group.Remove(context.Background())
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	origins := map[int]string{}
	mount, _ := cgroup.Cgroup2Mount()
	rollback := func() {
		for pid, from := range origins {
			if from == "" {
				continue
			}
			os.WriteFile(mount+from+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0)
		}
		group.Thaw(context.Background())
		undoLayers(context.Background())
		group.Remove(context.Background())
	}
	if err := moveTree(ctx, group, opts, origins, warn); err != nil {
		rollback()
		return nil, err
	}
	if err := group.Thaw(ctx); err != nil {
		rollback()
		return nil, &BoundaryError{Layer: LayerCgroup, Err: err}
	}
	digest, _ := opts.Policy.Digest()
	e := &Entry{
		ID: id, Kind: KindAttach, PID: opts.PID, UID: opts.CallerUID, Mode: string(opts.Policy.Mode),
		Cgroup: group.Path, CgroupID: group.CgroupID, Layers: []string{LayerCgroup},
		PolicyDigest: digest, Started: time.Now().UTC(),
	}
	for _, l := range opts.Layers {
		e.Layers = append(e.Layers, l.Name())
	}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", opts.PID)); err == nil {
		e.Command = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	}
	if err := opts.Registry.Put(*e); err != nil {
		return e, err
	}
	return e, nil
}

// moveTree moves pid and its descendants until a full scan moves nothing.
func moveTree(ctx context.Context, group *cgroup.Group, opts AttachOptions, origins map[int]string, warn io.Writer) error {
	for round := 0; ; round++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if round > 1000 {
			return fmt.Errorf("attach pid %d: the process tree did not stop changing after %d scans", opts.PID, round)
		}
		kids, err := cgroup.Descendants(opts.PID)
		if err != nil {
			return fmt.Errorf("attach pid %d: %w", opts.PID, err)
		}
		moved := 0
		for _, pid := range append([]int{opts.PID}, kids...) {
			if _, done := origins[pid]; done {
				continue
			}
			if other, ok, _ := cgroup.SessionOf(opts.Cgroup, pid); ok && other != group.ID {
				fmt.Fprintf(warn, "oxsupervise attach: pid %d is already in session %s; left there\n", pid, other)
				origins[pid] = ""
				continue
			}
			from, err := cgroup.CgroupOf(pid)
			if err != nil {
				if pid == opts.PID {
					return fmt.Errorf("attach pid %d: %w", pid, err)
				}
				continue // exited meanwhile
			}
			if err := group.AddProcess(pid); err != nil {
				if errors.Is(err, unix.ESRCH) || errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return &BoundaryError{Layer: LayerCgroup, Err: fmt.Errorf("move pid %d: %w", pid, err)}
			}
			origins[pid] = from
			moved++
		}
		if moved == 0 && round > 0 {
			return nil
		}
	}
}
