//go:build linux

package daemon

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// guard makes every request safe to serve: a panic becomes a 500 for that
// request only, a body is bounded, and descriptors a request did not
// consume are closed when it ends.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if c := connOf(r.Context()); c != nil {
				c.closeFDs()
			}
		}()
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Printf("panic serving %s %s: %v", r.Method, r.URL.Path, v)
				writeError(w, errorf(http.StatusInternalServerError, "internal", "internal error (logged by the daemon)"))
			}
		}()
		r.Body = s.boundBody(w, r)
		next.ServeHTTP(w, r)
	})
}

// boundBody limits r's body to MaxRequestBytes and to the body timeout:
// the connection's read deadline covers the body and is lifted once the
// body has been read (a deadline left in place would end a streaming
// request's context when it fires).
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) io.ReadCloser {
	body := http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	if r.Body == http.NoBody || r.ContentLength == 0 {
		return body
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.opts.bodyTimeout)) != nil {
		return body
	}
	return &deadlineBody{ReadCloser: body, lift: func() { rc.SetReadDeadline(time.Time{}) }}
}

// deadlineBody lifts the read deadline when the body ends.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	b.once.Do(b.lift)
	return b.ReadCloser.Close()
}
