//go:build linux

package daemon

import (
	"errors"
	"net/url"
	"testing"
)

// FuzzAuditQuery: any query string a client sends to GET /audit is either
// decoded into a query that encodes back to the same filters, or refused
// with an *Error; it never panics.
func FuzzAuditQuery(f *testing.F) {
	for _, seed := range []string{
		"", "follow=1", "follow=1&session=s-1&pid=42&op=connect&since=2026-11-30T05:00:00Z",
		"follow=2", "pid=-1", "since=yesterday", "bogus=1", "session=a&session=b", "session=%00",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return // the HTTP server would not hand this to the handler
		}
		q, err := parseAuditQuery(v)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Message == "" {
				t.Fatalf("%q: refusal %v is not an *Error with a message", raw, err)
			}
			return
		}
		back, err := parseAuditQuery(q.Values())
		if err != nil {
			t.Fatalf("%q: re-encoded query %q refused: %v", raw, q.Values().Encode(), err)
		}
		if back.Follow != q.Follow || back.Session != q.Session || back.PID != q.PID || back.Op != q.Op || !back.Since.Equal(q.Since) {
			t.Fatalf("%q: round trip %+v -> %+v", raw, q, back)
		}
	})
}
