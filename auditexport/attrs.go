package auditexport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"

	"github.com/openoxide/oxsupervise/audit"
)

// Attributes flattens a record's JSON line into attributes named by its
// ECS field paths, sorted by name: {"event":{"action":"open"}} becomes
// event.action = "open". Arrays of strings stay string slices; other
// arrays (ancestry) become their JSON text.
func Attributes(line []byte) ([]attribute.KeyValue, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("audit record: %w", err)
	}
	var out []attribute.KeyValue
	flatten("", m, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func flatten(prefix string, v any, out *[]attribute.KeyValue) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			flatten(key, e, out)
		}
	case string:
		*out = append(*out, attribute.String(prefix, x))
	case bool:
		*out = append(*out, attribute.Bool(prefix, x))
	case json.Number:
		if n, err := x.Int64(); err == nil {
			*out = append(*out, attribute.Int64(prefix, n))
		} else if f, err := x.Float64(); err == nil {
			*out = append(*out, attribute.Float64(prefix, f))
		} else {
			*out = append(*out, attribute.String(prefix, x.String()))
		}
	case []any:
		strs := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				b, _ := json.Marshal(x)
				*out = append(*out, attribute.String(prefix, string(b)))
				return
			}
			strs = append(strs, s)
		}
		*out = append(*out, attribute.StringSlice(prefix, strs))
	case nil:
	}
}

// severity maps a record's kind: refusals are warnings, lost events
// errors, the rest information.
func severity(r *audit.Record) (otellog.Severity, string) {
	switch r.Ox.Kind {
	case audit.KindDenial, audit.KindSuppressed:
		return otellog.SeverityWarn, "WARN"
	case audit.KindEventsLost:
		return otellog.SeverityError, "ERROR"
	}
	return otellog.SeverityInfo, "INFO"
}

// logRecord is the OTLP log record of an audit record.
func logRecord(r *audit.Record, line []byte) (otellog.Record, error) {
	attrs, err := Attributes(line)
	if err != nil {
		return otellog.Record{}, err
	}
	var lr otellog.Record
	lr.SetTimestamp(r.Timestamp)
	sev, text := severity(r)
	lr.SetSeverity(sev)
	lr.SetSeverityText(text)
	body := r.Message
	if body == "" {
		body = r.Event.Action
	}
	lr.SetBody(attribute.StringValue(body))
	lr.SetEventName("oxsupervise." + string(r.Ox.Kind))
	lr.AddAttributes(attrs...)
	return lr, nil
}
