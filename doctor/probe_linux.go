//go:build linux

package doctor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/internal/companion"
	"github.com/openoxide/oxsupervise/internal/rcu"
	"github.com/openoxide/oxsupervise/loader"
)

func errnoName(e syscall.Errno) string {
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return fmt.Sprintf("errno %d", int(e))
}

func probeHost(ctx context.Context, r *Report) {
	r.Root = os.Geteuid() == 0
	probeKernel(r)
	probeLSM(r)
	r.BPFLSM = probeFrom(loader.ProbeBPFLSM())
	probeLandlock(r)
	probeCgroup(r)
	r.BTF = probeFrom(loader.ProbeBTF())
	probeAudit(r)
	probeLauncher(r)
}

// probeLauncher finds the launcher program as run does (companion.Find):
// not installed is a warning, installed but failing its check an error.
func probeLauncher(r *Report) {
	prog, err := companion.Find(companion.Launcher)
	switch {
	case errors.Is(err, companion.ErrNotFound):
		r.Launcher.Probe = Probe{OK: true}
	case err != nil:
		r.Launcher.Probe = probeFrom(err)
	default:
		prog.Close()
		r.Launcher.Probe, r.Launcher.Path = Probe{OK: true}, prog.Path
	}
}

func probeKernel(r *Report) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		r.Kernel.Error = fmt.Sprintf("uname: %v", err)
		return
	}
	r.Kernel.Release = unix.ByteSliceToString(u.Release[:])
	r.Kernel.Version = unix.ByteSliceToString(u.Version[:])
	if s, err := rcu.Read(); err != nil {
		r.Kernel.RCUError = err.Error()
	} else {
		r.Kernel.RCU = &s
	}
}

func probeLSM(r *Report) {
	lsms, err := loader.ActiveLSMs()
	if err != nil {
		r.LSM.Error = err.Error()
		return
	}
	r.LSM.Active = lsms
	// "none [integrity] confidentiality": the bracketed word is the mode.
	if b, err := os.ReadFile("/sys/kernel/security/lockdown"); err == nil {
		for _, w := range strings.Fields(string(b)) {
			if strings.HasPrefix(w, "[") {
				r.LSM.Lockdown = strings.Trim(w, "[]")
			}
		}
	}
}

func probeLandlock(r *Report) {
	// landlock_create_ruleset(NULL, 0, VERSION) returns the ABI version.
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		r.Landlock.Probe = probeFrom(fmt.Errorf("landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION): %w", errno))
		return
	}
	r.Landlock.Probe = Probe{OK: true}
	r.Landlock.ABI = int(abi)
}

func probeCgroup(r *Report) {
	mounts, err := cgroup.FindMounts()
	if err != nil {
		r.Cgroup.Probe = probeFrom(err)
		r.Cgroup.Layout = string(cgroup.LayoutNone)
		r.CgroupSockAddr = Probe{Error: "cgroup mounts unreadable"}
		return
	}
	r.Cgroup.Layout = string(mounts.Layout)
	r.Cgroup.Mount = mounts.Cgroup2
	if mounts.Cgroup2 != "" {
		favor := slices.Contains(mounts.Cgroup2Options, "favordynmods")
		r.Cgroup.FavorDynmods = &favor
	}
	r.Cgroup.Controllers, r.Cgroup.Enabled = []string{}, []string{}
	if mounts.Cgroup2 == "" {
		err := fmt.Errorf("%w (layout: %s)", cgroup.ErrNoCgroup2, mounts.Layout)
		r.Cgroup.Probe = probeFrom(err)
		r.CgroupSockAddr = Probe{Error: "no cgroup2 mount to attach to"}
		return
	}
	controllers, err := cgroup.Controllers(mounts.Cgroup2)
	if err != nil {
		r.Cgroup.Probe = probeFrom(err)
		r.CgroupSockAddr = Probe{Error: "cgroup2 unreadable"}
		return
	}
	r.Cgroup.Probe = Probe{OK: true}
	r.Cgroup.Controllers = controllers
	if enabled, err := cgroup.SubtreeControl(mounts.Cgroup2); err == nil {
		r.Cgroup.Enabled = enabled
	}
	r.CgroupSockAddr = probeFrom(probeInGroup(mounts.Cgroup2, r))
	r.Cgroup.Migration = probeMigration(mounts.Cgroup2)
}

// probeMigration times a migration of the doctor itself (cgroup.ProbeMigration).
func probeMigration(mount string) *Migration {
	c, err := cgroup.ProbeMigration(mount, cgroup.MigrationQuiet)
	if err != nil {
		return &Migration{Error: err.Error()}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	return &Migration{QuietMS: ms(c.Quiet), WarmMS: ms(c.Warm), WaitsForGracePeriod: c.WaitsForGracePeriod()}
}

// probeInGroup creates a throwaway child group, attaches the sock_addr probe
// to it (never to a group that holds real processes) and removes it again.
func probeInGroup(mount string, r *Report) error {
	dir := filepath.Join(mount, fmt.Sprintf("oxsupervise-doctor-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("cgroup sock_addr probe: create probe group: %w", err)
	}
	defer func() {
		// Detached links can keep the group busy for a moment.
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			err := unix.Rmdir(dir)
			if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				return
			}
		}
	}()
	kill, freeze := exists(filepath.Join(dir, "cgroup.kill")), exists(filepath.Join(dir, "cgroup.freeze"))
	r.Cgroup.Kill, r.Cgroup.Freeze = &kill, &freeze
	return loader.ProbeCgroupSockAddr(dir)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// auditStatus mirrors struct audit_status up to backlog_wait_time_actual.
type auditStatus struct {
	Mask, Enabled, Failure, PID, RateLimit, BacklogLimit, Lost, Backlog uint32
}

// probeAudit asks the kernel for its audit status (AUDIT_GET) over
// NETLINK_AUDIT. It never changes the audit configuration.
func probeAudit(r *Report) {
	st, err := auditGet()
	if err != nil {
		r.Audit.Probe = probeFrom(err)
		return
	}
	r.Audit.Probe = Probe{OK: true}
	r.Audit.Enabled = st.Enabled
	r.Audit.Failure = st.Failure
	r.Audit.DaemonPID = st.PID
	r.Audit.RateLimit = st.RateLimit
	r.Audit.BacklogMax = st.BacklogLimit
	r.Audit.Lost = st.Lost
	r.Audit.Backlog = st.Backlog
}

func auditGet() (auditStatus, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return auditStatus{}, fmt.Errorf("audit: open NETLINK_AUDIT socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 2}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return auditStatus{}, fmt.Errorf("audit: set receive timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return auditStatus{}, fmt.Errorf("audit: bind netlink socket: %w", err)
	}

	const seq = 1
	req := make([]byte, unix.SizeofNlMsghdr)
	binary.NativeEndian.PutUint32(req[0:4], unix.SizeofNlMsghdr)
	binary.NativeEndian.PutUint16(req[4:6], unix.AUDIT_GET)
	binary.NativeEndian.PutUint16(req[6:8], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(req[8:12], seq)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return auditStatus{}, fmt.Errorf("audit: send AUDIT_GET: %w", err)
	}

	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return auditStatus{}, fmt.Errorf("audit: receive AUDIT_GET reply: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return auditStatus{}, fmt.Errorf("audit: parse reply: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return auditStatus{}, errors.New("audit: short NLMSG_ERROR")
				}
				if code := int32(binary.NativeEndian.Uint32(m.Data[:4])); code != 0 {
					return auditStatus{}, fmt.Errorf("audit: AUDIT_GET refused: %w", syscall.Errno(-code))
				}
			case unix.AUDIT_GET:
				var st auditStatus
				if len(m.Data) < 32 {
					return auditStatus{}, fmt.Errorf("audit: AUDIT_GET reply of %d bytes, want at least 32", len(m.Data))
				}
				fields := []*uint32{&st.Mask, &st.Enabled, &st.Failure, &st.PID, &st.RateLimit, &st.BacklogLimit, &st.Lost, &st.Backlog}
				for i, f := range fields {
					*f = binary.NativeEndian.Uint32(m.Data[4*i:])
				}
				return st, nil
			}
		}
	}
}
