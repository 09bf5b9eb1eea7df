//go:build linux

package kernelaudit

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
)

// This file is how Run ends: the drain that reads every record queued
// before its context ended, on its own marker or, without one, on a quiet
// socket, and the count of what a drain that ran out of time left unread.

// marker is the drain marker of one Run: a record this reader writes into
// the kernel audit stream itself when its context ends.
type marker struct {
	text []byte // the message, unique to the Run
	seen bool   // the marker came back through the multicast group
}

// markerPrefix starts every drain marker's text. The text has no spaces or
// quotes: the kernel hex-encodes a user message that has them.
const markerPrefix = "oxsupervise-audit-drain="

func newMarker() marker {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand does not fail on Linux
	return marker{text: []byte(markerPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(nonce[:]))}
}

// sendMarker writes text into the kernel audit stream as a trusted
// application's message (AUDIT_TRUSTED_APP, needs CAP_AUDIT_WRITE). The
// kernel queues it behind every record already queued, and kauditd
// multicasts in queue order: once it arrives, every record that was queued
// before it has arrived too. On a machine running auditd the marker is one
// line in its log per drained reader; that is the price of an exact drain
// that does not wait for silence.
func sendMarker(text []byte) error {
	// The kernel overwrites the message's last byte with a NUL
	// (audit_receive_msg), so the text carries its own.
	_, err := auditRequest(auditTrustedApp, append(append([]byte(nil), text...), 0))
	return err
}

// auditTrustedApp is AUDIT_TRUSTED_APP (include/uapi/linux/audit.h):
// "trusted app msg - freestyle text", in the range of user messages the
// kernel accepts from a process with CAP_AUDIT_WRITE.
const auditTrustedApp = 1121

// markerGiveUp is how many receive timeouts in a row, with the kernel
// backlog empty, a drain waits for a marker that was accepted but never
// arrived (an audit rule such as "-a never,user" drops user messages
// before they are queued) before it falls back to the quiet-socket
// evidence. It bounds only that failure path; a delivered marker ends the
// drain at once.
const markerGiveUp = 20

// drainToMarker reads until the reader's own marker arrives: every record
// queued before the session's processes were gone has then been received
// (or its loss counted by the overflow and lost checks). There is no wait
// on the success path, only on receives that bring data.
func (r *Reader) drainToMarker(receive func() (got, stop bool, err error), mk *marker, emit func(audit.Record)) error {
	deadline := time.Now().Add(r.opts.DrainTimeout)
	quiet := 0
	defer func() {
		if mk.seen {
			r.mu.Lock()
			r.stats.MarkerDrains++
			r.mu.Unlock()
		}
	}()
	for !mk.seen {
		got, stop, err := receive()
		if stop {
			return err
		}
		if got || mk.seen {
			quiet = 0
			continue
		}
		st, err := getStatus()
		if err == nil && st.Backlog > 0 {
			quiet = 0
		} else {
			quiet++
		}
		if quiet >= markerGiveUp {
			return nil
		}
		if time.Now().After(deadline) {
			r.reportUnread(st.Backlog, emit)
			return nil
		}
	}
	return nil
}

// drain is the fallback when no marker could be written: it reads until
// the kernel's audit backlog is empty and two receive
// timeouts in a row brought nothing: kauditd multicasts a record right
// after taking it off the backlog, so an empty backlog followed by a quiet
// socket means every record queued before drain began was read or counted.
func (r *Reader) drain(receive func() (got, stop bool, err error), emit func(audit.Record)) error {
	deadline := time.Now().Add(r.opts.DrainTimeout)
	quiet := 0
	for quiet < 2 {
		got, stop, err := receive()
		if stop {
			return err
		}
		if got {
			quiet = 0
			continue
		}
		// Without a readable backlog (a transient AUDIT_GET failure) the
		// quiet socket is the best evidence left; stalling every session
		// stop for the whole DrainTimeout would be worse.
		st, err := getStatus()
		if err == nil && st.Backlog > 0 {
			quiet = 0
		} else {
			quiet++
		}
		if quiet < 2 && time.Now().After(deadline) {
			r.reportUnread(st.Backlog, emit)
			return nil
		}
	}
	return nil
}

// reportUnread ends a drain that ran out of time: what is still in the
// socket is counted (Landlock refusal records only) without being decoded,
// and the kernel backlog, of which any record may be a refusal, is added
// in full, so the count can be too high but never too low.
func (r *Reader) reportUnread(backlog uint32, emit func(audit.Record)) {
	buf := make([]byte, 1<<16)
	var refusals uint64
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, unix.MSG_DONTWAIT)
		if err != nil || n == 0 {
			break
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			length := int(binary.NativeEndian.Uint32(b[0:4]))
			if binary.NativeEndian.Uint16(b[4:6]) == TypeLandlockAccess {
				refusals++
			}
			aligned := (length + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
			if length < unix.NLMSG_HDRLEN || aligned >= len(b) {
				break
			}
			b = b[aligned:]
		}
	}
	lost := refusals + uint64(backlog)
	if lost == 0 {
		return
	}
	r.mu.Lock()
	r.stats.Unread += lost
	r.mu.Unlock()
	emit(audit.Record{
		Timestamp: time.Now(),
		Message: fmt.Sprintf("kernel audit reader stopped after %v with records unread: %d Landlock refusal records in its socket "+
			"and %d records of any kind still in the kernel backlog (any of which may be a refusal of this session)",
			r.opts.DrainTimeout, refusals, backlog),
		Ox: audit.Ox{Kind: audit.KindEventsLost, Layer: audit.LayerLandlock, EventsLost: lost},
	})
}
