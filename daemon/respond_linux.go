//go:build linux

package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = errorf(http.StatusInternalServerError, "internal", "%v", err)
	}
	writeJSON(w, e.Status, e)
}

// eventStream writes newline-delimited JSON events, flushed one by one.
type eventStream struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newEventStream(w http.ResponseWriter) *eventStream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	es := &eventStream{w: w, rc: http.NewResponseController(w)}
	es.rc.Flush()
	return es
}

func (es *eventStream) send(e Event) {
	es.mu.Lock()
	defer es.mu.Unlock()
	b, _ := json.Marshal(e)
	es.w.Write(append(b, '\n'))
	es.rc.Flush()
}

// warnWriter turns each line written into a warning event.
type warnWriter struct {
	es  *eventStream
	buf bytes.Buffer
}

func (ww *warnWriter) Write(b []byte) (int, error) {
	ww.buf.Write(b)
	for {
		line, err := ww.buf.ReadString('\n')
		if err != nil {
			ww.buf.WriteString(line)
			break
		}
		ww.es.send(Event{Event: "warning", Message: strings.TrimRight(line, "\n")})
	}
	return len(b), nil
}
