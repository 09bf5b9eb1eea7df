package audit

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/rs/zerolog"
)

// timestampLayout is RFC 3339 with nanoseconds, as ECS @timestamp expects
// and encoding/json decodes into time.Time.
const timestampLayout = time.RFC3339Nano

// Encoder writes records as JSON lines with zerolog. Each record reaches the
// underlying writer in exactly one Write call, so a writer that appends
// whole writes atomically never sees half a record. An Encoder is not safe
// for concurrent use.
type Encoder struct {
	w      io.Writer
	buf    bytes.Buffer
	logger zerolog.Logger
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder {
	e := &Encoder{w: w}
	e.logger = zerolog.New(&e.buf)
	return e
}

// Encode normalises r, validates it and writes it as one line.
func (e *Encoder) Encode(r *Record) error {
	line, err := e.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := e.w.Write(line); err != nil {
		return fmt.Errorf("write audit record: %w", err)
	}
	return nil
}

// Marshal normalises and validates r and returns its line (with the
// trailing newline). The slice is only valid until the next call.
func (e *Encoder) Marshal(r *Record) ([]byte, error) {
	r.Normalize()
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("invalid audit record: %w", err)
	}
	e.buf.Reset()
	e.logger.Log().EmbedObject(r).Send()
	return e.buf.Bytes(), nil
}

// MarshalZerologObject writes r's fields in schema order. It does not
// normalise: use Encoder, which does.
func (r *Record) MarshalZerologObject(e *zerolog.Event) {
	e.Str("@timestamp", r.Timestamp.UTC().Format(timestampLayout))
	e.Int("schema_version", r.SchemaVersion)
	if r.Message != "" {
		e.Str("message", r.Message)
	}
	e.Object("event", &r.Event)
	if r.Process != nil {
		e.Object("process", r.Process)
	}
	if r.User != nil {
		e.Object("user", r.User)
	}
	if r.File != nil {
		e.Object("file", r.File)
	}
	if r.Destination != nil {
		e.Object("destination", r.Destination)
	}
	if r.Network != nil {
		e.Object("network", r.Network)
	}
	if r.DNS != nil {
		e.Object("dns", r.DNS)
	}
	if r.Error != nil {
		e.Object("error", r.Error)
	}
	e.Object("oxsupervise", &r.Ox)
}

func (v *Event) MarshalZerologObject(e *zerolog.Event) {
	e.Str("kind", v.Kind)
	e.Strs("category", nonNil(v.Category))
	e.Strs("type", nonNil(v.Type))
	e.Str("action", v.Action)
	e.Str("outcome", v.Outcome)
	strIf(e, "reason", v.Reason)
}

func (v *Process) MarshalZerologObject(e *zerolog.Event) {
	if v.PID != 0 {
		e.Int("pid", v.PID)
	}
	strIf(e, "name", v.Name)
	strIf(e, "executable", v.Executable)
	strIf(e, "command_line", v.CommandLine)
	if v.Thread != nil {
		e.Dict("thread", zerolog.Dict().Int("id", v.Thread.ID))
	}
	if v.Parent != nil {
		d := zerolog.Dict().Int("pid", v.Parent.PID)
		strIf(d, "name", v.Parent.Name)
		strIf(d, "executable", v.Parent.Executable)
		e.Dict("parent", d)
	}
}

func (v *User) MarshalZerologObject(e *zerolog.Event) {
	e.Str("id", v.ID)
	strIf(e, "name", v.Name)
}

func (v *File) MarshalZerologObject(e *zerolog.Event) {
	strIf(e, "path", v.Path)
	strIf(e, "device", v.Device)
	if v.Inode != 0 {
		e.Str("inode", strconv.FormatUint(v.Inode, 10))
	}
}

func (v *Destination) MarshalZerologObject(e *zerolog.Event) {
	if v.IP.IsValid() {
		e.Str("ip", v.IP.String())
	} else {
		e.Str("ip", "")
	}
	if v.Port != 0 {
		e.Uint16("port", v.Port)
	}
	strIf(e, "domain", v.Domain)
}

func (v *Network) MarshalZerologObject(e *zerolog.Event) {
	strIf(e, "transport", v.Transport)
	strIf(e, "type", v.Type)
}

func (v *DNS) MarshalZerologObject(e *zerolog.Event) {
	q := zerolog.Dict().Str("name", v.Question.Name)
	if v.Question.Type != "" {
		q.Str("type", v.Question.Type)
	}
	e.Dict("question", q)
	strIf(e, "response_code", v.ResponseCode)
}

func (v *Error) MarshalZerologObject(e *zerolog.Event) {
	e.Str("code", v.Code)
	strIf(e, "message", v.Message)
}

func (v *Ox) MarshalZerologObject(e *zerolog.Event) {
	e.Str("kind", string(v.Kind))
	strIf(e, "session", v.Session)
	strIf(e, "parent_session", v.ParentSession)
	strIf(e, "layer", string(v.Layer))
	strIf(e, "class", string(v.Class))
	strIf(e, "decision", v.Decision)
	if v.Errno != 0 {
		e.Int("errno", v.Errno)
	}
	strIf(e, "rule", v.Rule)
	strIf(e, "mode", v.Mode)
	if v.Suppressed != 0 {
		e.Uint64("suppressed", v.Suppressed)
	}
	if v.EventsLost != 0 {
		e.Uint64("events_lost", v.EventsLost)
	}
	strIf(e, "policy_digest", v.PolicyDigest)
	strIf(e, "previous_policy_digest", v.PreviousPolicyDigest)
	if v.Approval != nil {
		a := zerolog.Dict().Str("id", v.Approval.ID).Str("decision", v.Approval.Decision)
		if v.Approval.Command != "" {
			a.Str("command", v.Approval.Command)
		}
		e.Dict("approval", a)
	}
	strIf(e, "landlock_domain", v.LandlockDomain)
	if len(v.Ancestry) > 0 {
		arr := zerolog.Arr()
		for _, a := range v.Ancestry {
			d := zerolog.Dict().Int("pid", a.PID)
			strIf(d, "name", a.Name)
			arr.Dict(d)
		}
		e.Array("ancestry", arr)
	}
	if len(v.Enriched) > 0 {
		e.Strs("enriched", v.Enriched)
	}
}

func strIf(e *zerolog.Event, key, val string) {
	if val != "" {
		e.Str(key, val)
	}
}

// nonNil keeps empty arrays as [] rather than null, which ingest pipelines
// handle more predictably.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
