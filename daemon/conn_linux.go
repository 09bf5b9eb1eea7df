//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// maxQueuedFDs bounds the descriptors a connection may have waiting; a
// client that sends more is disconnected and its descriptors closed.
const maxQueuedFDs = 16

// fdConn is an accepted connection that collects the file descriptors the
// client sends as SCM_RIGHTS along with the request bytes.
type fdConn struct {
	*net.UnixConn
	peer Peer

	// release uncounts the connection in the limiter.
	release func()

	mu     sync.Mutex
	fds    []int
	broken error
}

func (c *fdConn) Read(b []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(maxQueuedFDs*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(b, oob)
	if n < 0 {
		// recvmsg's -1 on error (a deadline, a reset): io.Reader must
		// never return a negative count (bufio panics on one).
		n = 0
	}
	if oobn > 0 {
		fds, perr := parseRights(oob[:oobn])
		c.mu.Lock()
		c.fds = append(c.fds, fds...)
		switch {
		case perr != nil:
			c.broken = perr
		case flags&unix.MSG_CTRUNC != 0:
			c.broken = errors.New("too many file descriptors in one message (control data truncated)")
		case len(c.fds) > maxQueuedFDs:
			c.broken = fmt.Errorf("more than %d file descriptors queued", maxQueuedFDs)
		}
		broken := c.broken
		c.mu.Unlock()
		if broken != nil {
			c.closeFDs()
			c.UnixConn.Close()
			return 0, broken
		}
	}
	return n, err
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	var out []int
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_RIGHTS {
			continue
		}
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			return out, fmt.Errorf("SCM_RIGHTS: %w", err)
		}
		out = append(out, fds...)
	}
	return out, nil
}

// takeFDs hands every queued descriptor to the caller.
func (c *fdConn) takeFDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	fds := c.fds
	c.fds = nil
	return fds
}

func (c *fdConn) closeFDs() {
	for _, fd := range c.takeFDs() {
		unix.Close(fd)
	}
}

func (c *fdConn) Close() error {
	if c.release != nil {
		c.release()
	}
	c.closeFDs()
	if c.peer.pidfd >= 0 {
		unix.Close(c.peer.pidfd)
		c.peer.pidfd = -1
	}
	return c.UnixConn.Close()
}

// fdListener wraps accepted connections in fdConn with their peer, and
// refuses connections beyond the limiter's bounds.
type fdListener struct {
	*net.UnixListener
	limits *connLimiter
}

func (l fdListener) Accept() (net.Conn, error) {
	for {
		uc, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		peer, err := peerOf(uc)
		if err != nil {
			// A peer the kernel cannot describe is never served.
			uc.Close()
			continue
		}
		release, why := l.limits.admit(peer.UID)
		if why != "" {
			if peer.pidfd >= 0 {
				unix.Close(peer.pidfd)
			}
			go refuseConn(uc, why)
			continue
		}
		return &fdConn{UnixConn: uc, peer: peer, release: release}, nil
	}
}

// connKey is the request context key of the connection a request came on
// (set by withConn, the http.Server's ConnContext).
type connKey struct{}

func withConn(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*fdConn); ok {
		return context.WithValue(ctx, connKey{}, fc)
	}
	return ctx
}

// connOf returns the connection a request came on, nil when it was not
// accepted by fdListener.
func connOf(ctx context.Context) *fdConn {
	c, _ := ctx.Value(connKey{}).(*fdConn)
	return c
}
