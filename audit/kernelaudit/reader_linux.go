//go:build linux

package kernelaudit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
)

// Reader receives kernel audit records from the NETLINK_AUDIT multicast
// group.
type Reader struct {
	opts Options
	fd   int
	// sock is fd in the Go runtime's poller (non-blocking): a receive
	// waits there, holding no thread for the session's length, until
	// records arrive, receiveWait passes or Close closes it.
	sock        *os.File
	conn        syscall.RawConn
	enabledByUs bool
	// lost is the kernel's audit_status.lost when last read.
	lost uint32
	// inode identifies the socket in /proc/net/netlink; drops is its
	// Drops column when last read.
	inode uint64
	drops uint64

	mu     sync.Mutex
	stats  Stats
	closed bool
}

// ErrUnavailable wraps every reason the kernel audit feed cannot be used
// (no CONFIG_AUDIT, no CAP_AUDIT_READ/CONTROL, not in the initial network
// namespace).
var ErrUnavailable = errors.New("kernel audit unavailable")

// Open subscribes to the audit log multicast group and enables auditing
// if it is off (Landlock logs nothing otherwise).
func Open(opts Options) (*Reader, error) {
	if opts.FlushAfter <= 0 {
		opts.FlushAfter = 200 * time.Millisecond
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 15 * time.Second
	}
	if opts.MinBacklogLimit == 0 {
		opts.MinBacklogLimit = 8192
	}
	st, err := getStatus()
	if err != nil {
		return nil, err
	}
	enabled, lost := st.Enabled, st.Lost
	if opts.MinBacklogLimit > 0 && st.BacklogLimit < uint32(opts.MinBacklogLimit) {
		if err := setStatus(auditStatus{Mask: auditStatusBacklogLimit, BacklogLimit: uint32(opts.MinBacklogLimit)}); err != nil {
			return nil, fmt.Errorf("raise audit backlog_limit to %d: %w", opts.MinBacklogLimit, err)
		}
	}
	r := &Reader{opts: opts, fd: -1, lost: lost}
	if enabled == 0 {
		if err := setAuditEnabled(1); err != nil {
			return nil, err
		}
		r.enabledByUs = true
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_AUDIT)
	if err != nil {
		r.restore()
		return nil, fmt.Errorf("%w: netlink audit socket: %v", ErrUnavailable, err)
	}
	// A large buffer rides out bursts; an overflow is still reported.
	rcvbuf := opts.receiveBuffer
	if rcvbuf == 0 {
		rcvbuf = 8 << 20
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf); err != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf)
	}
	// A socket not yet bound to the group has dropped nothing: r.drops
	// starts at 0 without being read.
	var sockStat unix.Stat_t
	if err := unix.Fstat(fd, &sockStat); err == nil {
		r.inode = sockStat.Ino
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (unix.AUDIT_NLGRP_READLOG - 1)}); err != nil {
		unix.Close(fd)
		r.restore()
		return nil, fmt.Errorf("%w: join audit multicast group (needs CAP_AUDIT_READ): %v", ErrUnavailable, err)
	}
	r.fd, r.sock = fd, os.NewFile(uintptr(fd), "netlink audit")
	if r.conn, err = r.sock.SyscallConn(); err != nil {
		r.sock.Close()
		r.restore()
		return nil, fmt.Errorf("netlink audit socket: %w", err)
	}
	return r, nil
}

// EnabledByUs reports whether Open turned auditing on.
func (r *Reader) EnabledByUs() bool { return r.enabledByUs }

// Stats returns a snapshot of the counters.
func (r *Reader) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Run reads records until ctx ends or Close is called, calling emit for
// every Landlock refusal attributed to a session, and for an events_lost
// record whenever the kernel dropped records because the socket was full.
// emit is called from Run's goroutine only.
//
// When ctx ends Run does not stop at once: the kernel queues a refusal's
// records before the refused syscall returns, but delivers them later from
// kauditd, and a flood can leave thousands of them in the kernel's backlog
// and in the socket. When ctx ends, Run writes its own marker record into
// the audit stream (sendMarker) and reads until the marker comes back:
// kauditd delivers in queue order, so a caller that cancels after its
// session's processes are gone gets every record, without waiting for
// silence. Where the marker cannot be written (no CAP_AUDIT_WRITE) Run
// falls back to reading until the backlog is empty and the socket stays
// quiet. A drain that cannot finish within Options.DrainTimeout (another
// audit user keeps the backlog busy) ends with an events_lost record
// counting what was left unread. Close stops Run at once.
func (r *Reader) Run(ctx context.Context, emit func(audit.Record)) error {
	// The drain marker is sent the moment ctx ends; its arrival also
	// wakes the receive below, so the drain starts without waiting out a
	// receive timeout.
	mk := newMarker()
	markerSent := make(chan error, 1)
	runDone := make(chan struct{})
	defer close(runDone)
	go func() {
		select {
		case <-ctx.Done():
			markerSent <- sendMarker(mk.text)
		case <-runDone:
		}
	}()
	l := r.newLoop(r.opts.SessionOfAuditSession, emit, func(payload []byte) {
		if bytes.Contains(payload, mk.text) {
			mk.seen = true
		}
	})
	defer l.finish()
	for ctx.Err() == nil {
		if _, stop, err := l.receive(); stop {
			return err
		}
	}
	if err := <-markerSent; err == nil {
		return r.drainToMarker(l.receive, &mk, emit)
	}
	return r.drain(l.receive, emit)
}

// loop is one reading of the feed, Run's or a Hub's: the assembler, the
// receive step and the loss checks.
type loop struct {
	r             *Reader
	asm           *assembler
	buf           []byte
	emit          func(audit.Record)
	trusted       func(payload []byte)
	nextLostCheck time.Time
}

// newLoop reads r's feed, emitting records through emit and handing every
// trusted application message (a drain marker) to trusted, in stream
// order: every record that arrived before it has been added by then.
func (r *Reader) newLoop(ofSes func(uint32) (string, bool), emit func(audit.Record), trusted func(payload []byte)) *loop {
	asm := newAssembler(r.opts.FlushAfter)
	asm.sessionOfSes = ofSes
	return &loop{r: r, asm: asm, buf: make([]byte, 1<<16), emit: emit, trusted: trusted,
		nextLostCheck: time.Now().Add(lostCheckInterval)}
}

// flush emits the records of events.
func (l *loop) flush(events []Event) {
	r := l.r
	for _, ev := range events {
		recs, unattributed := l.asm.records(ev, r.sessionOf, r.opts.KeepUnattributed)
		r.mu.Lock()
		r.stats.Denials += uint64(len(recs))
		r.stats.Unattributed += uint64(unattributed)
		r.mu.Unlock()
		for _, rec := range recs {
			l.emit(rec)
		}
	}
}

// finish flushes what is still pending and reports the last losses.
func (l *loop) finish() {
	l.flush(l.asm.expire(time.Now().Add(24 * time.Hour)))
	l.r.checkDrops(time.Now(), l.emit)
	l.r.checkLost(l.emit)
}

// receiveWait bounds how long a receive waits for a datagram: the
// assembler's flushes and the loss checks happen between receives.
const receiveWait = 50 * time.Millisecond

// receive reads one datagram (or times out) and reports whether anything
// arrived; stop is true once Close was called.
func (l *loop) receive() (got, stop bool, err error) {
	r := l.r
	var n int
	r.sock.SetReadDeadline(time.Now().Add(receiveWait))
	if werr := r.conn.Read(func(fd uintptr) bool {
		n, _, err = unix.Recvfrom(int(fd), l.buf, 0)
		return !errors.Is(err, unix.EAGAIN) // EAGAIN: wait in the poller
	}); werr != nil {
		err = werr
		if errors.Is(werr, os.ErrDeadlineExceeded) {
			err = unix.EAGAIN
		}
	}
	now := time.Now()
	switch {
	case err == nil:
		got = n > 0
		r.parse(l.buf[:n], func(m Message) { l.flush(l.asm.add(m, now)) }, l.trusted)
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
	case errors.Is(err, unix.ENOBUFS):
		got = true
		r.reportOverflow(now, l.emit)
	default:
		if r.isClosed() {
			return false, true, nil
		}
		return false, true, fmt.Errorf("receive kernel audit records: %w", err)
	}
	l.flush(l.asm.expire(now))
	if now.After(l.nextLostCheck) {
		r.checkLost(l.emit)
		l.nextLostCheck = now.Add(lostCheckInterval)
	}
	return got, false, nil
}

func (r *Reader) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// checkDrops reports socket drops that no ENOBUFS announced yet (the
// overflow happened after the last receive).
func (r *Reader) checkDrops(now time.Time, emit func(audit.Record)) {
	if drops, err := socketDrops(r.fd, r.inode); err == nil && drops > r.drops {
		r.reportOverflow(now, emit)
	}
}

// reportOverflow turns a receive-buffer overflow into an events_lost
// record. The socket's Drops counter in /proc/net/netlink gives the exact
// number of records the kernel could not queue; without it the record says
// "at least one".
func (r *Reader) reportOverflow(now time.Time, emit func(audit.Record)) {
	lost := uint64(1)
	msg := "kernel audit socket overflowed: at least one kernel audit record (possibly a Landlock refusal) was lost"
	if drops, err := socketDrops(r.fd, r.inode); err == nil && drops > r.drops {
		lost = drops - r.drops
		r.drops = drops
		msg = "kernel audit socket overflowed: kernel audit records (any of which may have been a Landlock refusal) were lost"
	}
	r.mu.Lock()
	r.stats.Overflows += lost
	r.mu.Unlock()
	emit(audit.Record{
		Timestamp: now,
		Message:   msg,
		Ox:        audit.Ox{Kind: audit.KindEventsLost, Layer: audit.LayerLandlock, EventsLost: lost},
	})
}

// socketDrops is how many records the kernel could not queue on the
// socket fd (its sk_drops): SO_MEMINFO's SK_MEMINFO_DROPS (Linux 4.12), or
// where that is refused, the Drops column /proc/net/netlink shows for the
// socket's inode (a walk of every netlink socket of the machine, costlier).
func socketDrops(fd int, inode uint64) (uint64, error) {
	if n, ok := meminfoDrops(fd); ok {
		return n, nil
	}
	return netlinkDrops(inode)
}

// meminfoDrops is SO_MEMINFO's SK_MEMINFO_DROPS of the socket fd; false
// when the kernel does not give it.
func meminfoDrops(fd int) (uint64, bool) {
	var mem [skMeminfoVars]uint32
	n := uint32(unsafe.Sizeof(mem))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 || n <= skMeminfoDrops*4 {
		return 0, false
	}
	return uint64(mem[skMeminfoDrops]), true
}

// The indexes of SO_MEMINFO's array (include/uapi/linux/sock_diag.h).
const (
	skMeminfoDrops = 8
	skMeminfoVars  = 9
)

// netlinkDrops reads the Drops column of the netlink socket with inode.
func netlinkDrops(inode uint64) (uint64, error) {
	b, err := os.ReadFile("/proc/net/netlink")
	if err != nil {
		return 0, err
	}
	want := strconv.FormatUint(inode, 10)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) >= 10 && f[9] == want {
			return strconv.ParseUint(f[8], 10, 64)
		}
	}
	return 0, fmt.Errorf("socket inode %d not in /proc/net/netlink", inode)
}

// lostCheckInterval is how often the kernel's lost counter is polled.
const lostCheckInterval = time.Second

// checkLost turns an increase of the kernel's audit lost counter into an
// events_lost record. The counter is global to the audit subsystem, so the
// lost records may or may not have been Landlock refusals; the record says
// so rather than guessing.
func (r *Reader) checkLost(emit func(audit.Record)) {
	st, err := getStatus()
	if err != nil {
		return // transient; the next check sees the whole increase
	}
	lost := st.Lost
	// Without auditd the kernel also counts a record as lost when only its
	// printk copy was rate-limited, after the multicast copy reached this
	// reader: the count can be too high, never too low.
	delta := lost - r.lost // uint32 arithmetic survives the counter wrapping
	r.lost = lost
	if delta == 0 {
		return
	}
	r.mu.Lock()
	r.stats.KernelLost += uint64(delta)
	r.mu.Unlock()
	emit(audit.Record{
		Timestamp: time.Now(),
		Message: "the kernel audit lost counter rose: records were dropped (backlog_limit or rate_limit) or, with no auditd running, " +
			"only their console copy was rate-limited; any of them may have been a Landlock refusal",
		Ox: audit.Ox{Kind: audit.KindEventsLost, Layer: audit.LayerLandlock, EventsLost: uint64(delta)},
	})
}

// parse splits a datagram into audit messages, handing each audit record
// to msg and each trusted application message to trusted, in order.
// Multicast copies carry a correct nlmsg_len (unlike the unicast feed to
// auditd), but a short or over-long length is tolerated by taking the rest
// of the datagram.
func (r *Reader) parse(b []byte, msg func(Message), trusted func(payload []byte)) {
	for len(b) >= unix.NLMSG_HDRLEN {
		length := int(binary.NativeEndian.Uint32(b[0:4]))
		typ := binary.NativeEndian.Uint16(b[4:6])
		end := length
		if end < unix.NLMSG_HDRLEN || end > len(b) {
			end = len(b)
		}
		payload := b[unix.NLMSG_HDRLEN:end]
		r.mu.Lock()
		r.stats.Messages++
		r.mu.Unlock()
		if typ == auditTrustedApp && trusted != nil {
			trusted(payload)
		}
		if typ >= 1300 && typ < 1500 {
			if m, err := ParseMessage(typ, payload); err == nil {
				msg(m)
			} else {
				r.mu.Lock()
				r.stats.Unparsable++
				r.mu.Unlock()
			}
		}
		aligned := (end + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if aligned >= len(b) {
			break
		}
		b = b[aligned:]
	}
}

func (r *Reader) sessionOf(pid int) (string, bool) {
	if r.opts.SessionOfPID != nil {
		if s, ok := r.opts.SessionOfPID(pid); ok {
			return s, true
		}
	}
	// The innermost session: a nested session's rules are its own.
	chain, err := cgroup.SessionChain(r.opts.Cgroup, pid)
	if err != nil || len(chain) == 0 {
		return "", false // exited: only the producer's map could have known
	}
	return chain[len(chain)-1], true
}

// Close stops Run and, if RestoreOnClose and Open enabled auditing,
// disables it again.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	var err error
	if r.sock != nil {
		// Closing the file ends a receive waiting in another goroutine.
		err = r.sock.Close()
	}
	if r.opts.RestoreOnClose {
		if rerr := r.restore(); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

func (r *Reader) restore() error {
	if !r.enabledByUs {
		return nil
	}
	r.enabledByUs = false
	return setAuditEnabled(0)
}
