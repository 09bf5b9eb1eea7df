//go:build linux

package kernelaudit

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds the unicast requests to the kernel's audit subsystem
// (AUDIT_GET, AUDIT_SET, user messages) on a fresh netlink socket each.

// auditStatus mirrors struct audit_status (include/uapi/linux/audit.h).
type auditStatus struct {
	Mask, Enabled, Failure, PID, RateLimit, BacklogLimit, Lost, Backlog uint32
	FeatureBitmap, BacklogWaitTime, BacklogWaitTimeActual               uint32
}

const (
	auditStatusEnabled      = 0x1  // AUDIT_STATUS_ENABLED
	auditStatusBacklogLimit = 0x10 // AUDIT_STATUS_BACKLOG_LIMIT
)

// getStatus returns the kernel's audit_status: enabled (0 off, 1 on, 2
// locked on), lost (records the kernel dropped), backlog_limit and backlog
// (records queued for kauditd).
func getStatus() (auditStatus, error) {
	reply, err := auditRequest(unix.AUDIT_GET, nil)
	if err != nil {
		return auditStatus{}, err
	}
	if len(reply) < 32 {
		return auditStatus{}, fmt.Errorf("%w: short AUDIT_GET reply (%d bytes)", ErrUnavailable, len(reply))
	}
	u32 := func(off int) uint32 { return binary.NativeEndian.Uint32(reply[off : off+4]) }
	return auditStatus{Mask: u32(0), Enabled: u32(4), Failure: u32(8), PID: u32(12), RateLimit: u32(16),
		BacklogLimit: u32(20), Lost: u32(24), Backlog: u32(28)}, nil
}

func setAuditEnabled(v uint32) error {
	if err := setStatus(auditStatus{Mask: auditStatusEnabled, Enabled: v}); err != nil {
		return fmt.Errorf("set audit enabled=%d: %w", v, err)
	}
	return nil
}

// setStatus sends AUDIT_SET; only the fields named in st.Mask change.
func setStatus(st auditStatus) error {
	payload := unsafe.Slice((*byte)(unsafe.Pointer(&st)), unsafe.Sizeof(st))
	_, err := auditRequest(unix.AUDIT_SET, payload)
	return err
}

// auditRequest sends one request on a fresh unicast socket and returns
// the payload of the reply of the same type (AUDIT_GET), or nil after a
// successful ack (AUDIT_SET).
func auditRequest(typ uint16, payload []byte) ([]byte, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("%w: netlink audit socket: %v", ErrUnavailable, err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(time.Second.Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("%w: bind netlink audit socket: %v", ErrUnavailable, err)
	}
	msg := make([]byte, unix.NLMSG_HDRLEN+len(payload))
	binary.NativeEndian.PutUint32(msg[0:4], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:6], typ)
	// AUDIT_GET's reply is sent from a kernel thread and may arrive after
	// an ack, so only AUDIT_SET asks for one.
	flags := uint16(unix.NLM_F_REQUEST)
	if typ != unix.AUDIT_GET {
		flags |= unix.NLM_F_ACK
	}
	binary.NativeEndian.PutUint16(msg[6:8], flags)
	binary.NativeEndian.PutUint32(msg[8:12], 1)
	copy(msg[unix.NLMSG_HDRLEN:], payload)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("%w: send audit request %d: %v", ErrUnavailable, typ, err)
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: audit request %d: %v", ErrUnavailable, typ, err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("audit request %d: %w", typ, err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, fmt.Errorf("audit request %d: short netlink error", typ)
				}
				if errno := int32(binary.NativeEndian.Uint32(m.Data[0:4])); errno != 0 {
					err := unix.Errno(-errno)
					if err == unix.EPERM || err == unix.EACCES {
						return nil, fmt.Errorf("%w: audit request %d (needs CAP_AUDIT_CONTROL): %v", ErrUnavailable, typ, err)
					}
					return nil, fmt.Errorf("audit request %d: %w", typ, err)
				}
				return nil, nil
			case typ:
				return append([]byte(nil), m.Data...), nil
			}
		}
	}
}
