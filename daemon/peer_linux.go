//go:build linux

package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// maxQueuedFDs bounds the descriptors a connection may have waiting; a
// client that sends more is disconnected and its descriptors closed.
const maxQueuedFDs = 16

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
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.PID))
	if err != nil {
		return nil, fmt.Errorf("peer pid %d: %w", p.PID, err)
	}
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Groups:"); ok {
			for _, w := range strings.Fields(rest) {
				n, err := strconv.Atoi(w)
				if err != nil {
					return nil, fmt.Errorf("peer pid %d: bad Groups line", p.PID)
				}
				out = append(out, n)
			}
		}
	}
	if !p.alive() {
		return nil, fmt.Errorf("peer pid %d exited during the request", p.PID)
	}
	return out, nil
}

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

// connLimiter bounds the connections the daemon holds open, in all and per
// uid, so that one user (or a confined agent) opening connections and
// never finishing a request cannot take every slot, descriptor and
// goroutine. Root is never refused: it is the operator who must be able to
// list and stop sessions during such a flood.
type connLimiter struct {
	maxTotal, maxPerUID int

	mu    sync.Mutex
	total int
	byUID map[int]int
}

func newConnLimiter(maxTotal, maxPerUID int) *connLimiter {
	return &connLimiter{maxTotal: maxTotal, maxPerUID: maxPerUID, byUID: map[int]int{}}
}

// admit counts a new connection of uid and returns the function that
// uncounts it, or the reason it is refused.
func (l *connLimiter) admit(uid int) (release func(), refused string) {
	if l == nil {
		return func() {}, ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if uid != 0 {
		if l.byUID[uid] >= l.maxPerUID {
			return nil, fmt.Sprintf("uid %d already has %d connections open to the daemon (the limit per user)", uid, l.byUID[uid])
		}
		if l.total >= l.maxTotal {
			return nil, fmt.Sprintf("the daemon already has %d connections open (its limit)", l.total)
		}
	}
	l.total++
	l.byUID[uid]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.byUID[uid]--; l.byUID[uid] <= 0 {
				delete(l.byUID, uid)
			}
		})
	}, ""
}

// refuseConn answers a connection over the limits with a 503 and closes
// it, without reading its request. The write is bounded: a client that
// does not read cannot hold the daemon.
func refuseConn(uc *net.UnixConn, why string) {
	defer uc.Close()
	body, _ := json.Marshal(Error{Code: "busy", Message: why})
	uc.SetDeadline(time.Now().Add(time.Second))
	// The answer follows the request's headers (read briefly and
	// boundedly): HTTP clients drop an answer that comes before their
	// request, and a close before it makes their write fail with EPIPE
	// instead of telling them why.
	http.ReadRequest(bufio.NewReader(io.LimitReader(uc, 64<<10)))
	fmt.Fprintf(uc, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	uc.CloseWrite()
	io.Copy(io.Discard, io.LimitReader(uc, MaxRequestBytes))
}

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

type connKey struct{}

func withConn(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*fdConn); ok {
		return context.WithValue(ctx, connKey{}, fc)
	}
	return ctx
}

func connOf(ctx context.Context) *fdConn {
	c, _ := ctx.Value(connKey{}).(*fdConn)
	return c
}

// credential is a user the daemon acts for.
type credential struct {
	UID, GID int
	Groups   []int
}

// asUser runs fn on a dedicated OS thread whose filesystem identity is the
// user's (fsuid, fsgid, supplementary groups; the kernel drops the file
// capabilities of a thread whose fsuid is not 0), so that every file fn
// opens, stats or creates is subject to the user's own permissions: a user
// cannot make the daemon read or write, as root, a file they could not.
// The thread is never given back to the Go scheduler: it exits with the
// goroutine, so no other goroutine ever runs with the user's identity.
// fn must not start goroutines that touch the filesystem.
func asUser(cred credential, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread dies with this goroutine.
		groups := cred.Groups
		if groups == nil {
			groups = []int{}
		}
		if err := unix.Setgroups(groups); err != nil {
			done <- fmt.Errorf("setgroups for uid %d: %w", cred.UID, err)
			return
		}
		unix.Setfsgid(cred.GID)
		unix.Setfsuid(cred.UID)
		if got, _ := unix.SetfsuidRetUid(-1); got != cred.UID {
			done <- fmt.Errorf("setfsuid(%d) did not take (fsuid is %d)", cred.UID, got)
			return
		}
		if got, _ := unix.SetfsgidRetGid(-1); got != cred.GID {
			done <- fmt.Errorf("setfsgid(%d) did not take (fsgid is %d)", cred.GID, got)
			return
		}
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("panic as uid %d: %v", cred.UID, r)
			}
		}()
		done <- fn()
	}()
	return <-done
}
