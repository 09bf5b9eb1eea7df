package kernelaudit

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Audit record types this package reads (include/uapi/linux/audit.h).
const (
	TypeSyscall        = 1300
	TypeEOE            = 1320
	TypeSeccomp        = 1326
	TypeProctitle      = 1327
	TypeLandlockAccess = 1423
	TypeLandlockDomain = 1424
)

// Message is one kernel audit record.
type Message struct {
	Type   uint16
	Time   time.Time
	Serial uint64
	Fields Fields
}

// Fields are a record's key=value pairs in order; values are unquoted and
// hex-decoded where the kernel hex-encoded an untrusted string.
type Fields []Field

// Field is one key=value pair.
type Field struct{ Key, Value string }

// Get returns the value of key and whether it is present.
func (fs Fields) Get(key string) (string, bool) {
	for _, f := range fs {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// Int returns key's value as an integer, or 0.
func (fs Fields) Int(key string) int {
	v, _ := fs.Get(key)
	n, _ := strconv.Atoi(v)
	return n
}

// hexFields are fields the kernel writes with audit_log_untrustedstring:
// quoted when harmless, bare upper-case hex otherwise.
var hexFields = map[string]bool{
	"path": true, "exe": true, "comm": true, "proctitle": true, "name": true, "cwd": true, "dev": true,
}

// ParseMessage parses the text of one record, "audit(SEC.MSEC:SERIAL): k=v ...".
func ParseMessage(typ uint16, payload []byte) (Message, error) {
	payload = bytes.TrimRight(payload, "\x00\n")
	rest, ok := bytes.CutPrefix(payload, []byte("audit("))
	if !ok {
		return Message{}, fmt.Errorf("audit record type %d: no audit( stamp in %q", typ, truncate(payload))
	}
	end := bytes.Index(rest, []byte("):"))
	if end < 0 {
		return Message{}, fmt.Errorf("audit record type %d: unterminated stamp in %q", typ, truncate(payload))
	}
	stamp := string(rest[:end])
	ts, serialStr, ok := strings.Cut(stamp, ":")
	if !ok {
		return Message{}, fmt.Errorf("audit record type %d: stamp %q lacks a serial", typ, stamp)
	}
	serial, err := strconv.ParseUint(serialStr, 10, 64)
	if err != nil {
		return Message{}, fmt.Errorf("audit record type %d: serial %q: %w", typ, serialStr, err)
	}
	sec, msec, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return Message{}, fmt.Errorf("audit record type %d: time %q: %w", typ, ts, err)
	}
	ms, _ := strconv.ParseInt(msec, 10, 64)
	fields, err := parseFields(string(rest[end+2:]))
	if err != nil {
		return Message{}, fmt.Errorf("audit record type %d: %w", typ, err)
	}
	return Message{Type: typ, Time: time.Unix(s, ms*int64(time.Millisecond)), Serial: serial, Fields: fields}, nil
}

func truncate(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

func parseFields(s string) (Fields, error) {
	var out Fields
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return out, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			// A bare word (some records have them); skip it.
			sp := strings.IndexByte(s, ' ')
			if sp < 0 {
				return out, nil
			}
			s = s[sp:]
			continue
		}
		key := s[:eq]
		s = s[eq+1:]
		var val string
		if strings.HasPrefix(s, `"`) {
			endq := strings.IndexByte(s[1:], '"')
			if endq < 0 {
				return nil, fmt.Errorf("field %s: unterminated quote", key)
			}
			val = s[1 : 1+endq]
			s = s[endq+2:]
		} else {
			sp := strings.IndexByte(s, ' ')
			if sp < 0 {
				sp = len(s)
			}
			val = s[:sp]
			s = s[sp:]
			if hexFields[key] && val != "(null)" && val != "?" {
				if dec, err := decodeHex(val); err == nil {
					val = dec
				}
			}
		}
		out = append(out, Field{Key: key, Value: val})
	}
}

func decodeHex(v string) (string, error) {
	if len(v)%2 != 0 {
		return "", errors.New("odd length")
	}
	b, err := hex.DecodeString(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
