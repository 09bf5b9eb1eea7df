package audit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
)

// JournalSocket is systemd-journald's native protocol socket.
const JournalSocket = "/run/systemd/journal/socket"

// journalSender forwards records to systemd-journald over its native
// protocol, one datagram per record: MESSAGE is the human-readable line,
// OXSUPERVISE_RECORD the JSON record, so `journalctl -o json` carries
// everything the file does. The file stays the record of truth; a record
// journald refuses is counted, not retried.
type journalSender struct {
	conn *net.UnixConn
}

func dialJournal(path string) (*journalSender, error) {
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("connect to journald at %s: %w", path, err)
	}
	return &journalSender{conn: c}, nil
}

// send writes r (already normalised) whose JSON encoding is line.
func (j *journalSender) send(r *Record, line []byte) error {
	var b bytes.Buffer
	field := func(key string, value []byte) {
		// The binary form is safe for any value, newlines included.
		b.WriteString(key)
		b.WriteByte('\n')
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(value)))
		b.Write(n[:])
		b.Write(value)
		b.WriteByte('\n')
	}
	field("MESSAGE", []byte(FormatHuman(r, HumanOptions{})))
	field("PRIORITY", []byte(strconv.Itoa(journalPriority(r))))
	field("SYSLOG_IDENTIFIER", []byte("oxsupervise"))
	if r.Ox.Session != "" {
		field("OXSUPERVISE_SESSION", []byte(r.Ox.Session))
	}
	field("OXSUPERVISE_KIND", []byte(r.Ox.Kind))
	field("OXSUPERVISE_RECORD", bytes.TrimRight(line, "\n"))
	if _, err := j.conn.Write(b.Bytes()); err != nil {
		return fmt.Errorf("send audit record to journald: %w", err)
	}
	return nil
}

// journalPriority: refusals and losses are warnings, the rest notices.
func journalPriority(r *Record) int {
	switch r.Ox.Kind {
	case KindDenial, KindSuppressed, KindEventsLost:
		return 4
	}
	return 5
}

func (j *journalSender) close() error {
	if j == nil {
		return nil
	}
	return errors.Join(j.conn.Close())
}
