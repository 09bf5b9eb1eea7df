//go:build linux

package daemon

import (
	"errors"
	"fmt"
	"net"

	"github.com/openoxide/oxsupervise/internal/procfs"

	"golang.org/x/sys/unix"
)

// Peer is the connecting process as the kernel reported it when it
// connected. Nothing in it comes from the client.
type Peer struct {
	UID, GID, PID int
	// pidfd refers to the peer process itself (SO_PEERPIDFD), so that a
	// check on /proc/PID can be confirmed to have been about that process
	// and not a later one that reused the pid; -1 when the kernel is too
	// old (then checks fall back to pidfd_open right after accept).
	pidfd int
}

// alive reports whether the peer process still exists: a /proc/PID read
// that is followed by alive()==true was about the peer.
func (p *Peer) alive() bool {
	if p.pidfd < 0 {
		return false
	}
	return unix.PidfdSendSignal(p.pidfd, 0, nil, 0) == nil
}

// groups returns the peer's supplementary groups from /proc, confirmed
// against the pidfd.
func (p *Peer) groups() ([]int, error) {
	st, err := procfs.ReadStatus(p.PID)
	if err != nil {
		return nil, fmt.Errorf("peer pid %d: %w", p.PID, err)
	}
	if !p.alive() {
		return nil, fmt.Errorf("peer pid %d exited during the request", p.PID)
	}
	return st.Groups, nil
}

// peerOf asks the kernel who is at the other end of uc (SO_PEERCRED, and
// SO_PEERPIDFD to pin the process); nothing the client sends is consulted.
func peerOf(uc *net.UnixConn) (Peer, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	p := Peer{pidfd: -1}
	var cerr error
	err = raw.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			cerr = fmt.Errorf("SO_PEERCRED: %w", err)
			return
		}
		p.UID, p.GID, p.PID = int(cred.Uid), int(cred.Gid), int(cred.Pid)
		pidfd, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
		if err == nil {
			unix.CloseOnExec(pidfd)
			p.pidfd = pidfd
		}
	})
	if err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, cerr
	}
	if p.PID <= 0 {
		return Peer{}, errors.New("peer has no pid in this pid namespace")
	}
	if p.pidfd < 0 {
		// Kernels before 6.5: a pidfd taken now narrows, but does not
		// close, the window for pid reuse.
		if fd, err := unix.PidfdOpen(p.PID, 0); err == nil {
			p.pidfd = fd
		}
	}
	return p, nil
}
