package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds one record; longer lines are reported, not buffered
// without limit. Paths and command lines are far below it.
const MaxLineBytes = 1 << 20

// Decode parses one JSON line. Unknown fields are ignored so that older
// readers can read newer logs; use DecodeStrict to check a line against
// this schema exactly.
func Decode(line []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return Record{}, fmt.Errorf("decode audit record: %w", err)
	}
	if r.SchemaVersion == 0 {
		return Record{}, errors.New("decode audit record: no schema_version (not an oxsupervise audit line)")
	}
	return r, nil
}

// DecodeStrict is Decode that also rejects fields this schema does not define.
func DecodeStrict(line []byte) (Record, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("decode audit record: %w", err)
	}
	if r.SchemaVersion != SchemaVersion {
		return Record{}, fmt.Errorf("decode audit record: schema_version %d, want %d", r.SchemaVersion, SchemaVersion)
	}
	return r, nil
}

// Reader reads records from a stream of JSON lines.
type Reader struct {
	sc   *bufio.Scanner
	line int
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), MaxLineBytes)
	return &Reader{sc: sc}
}

// Next returns the next record, io.EOF at the end, or an error naming the
// line that could not be decoded (the caller may continue after it).
func (rd *Reader) Next() (Record, error) {
	for rd.sc.Scan() {
		rd.line++
		b := rd.sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		r, err := Decode(b)
		if err != nil {
			return Record{}, fmt.Errorf("line %d: %w", rd.line, err)
		}
		return r, nil
	}
	if err := rd.sc.Err(); err != nil {
		return Record{}, fmt.Errorf("read audit log: %w", err)
	}
	return Record{}, io.EOF
}
