package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Instrument counts every request next serves by its route pattern (as
// the ServeMux below matched it: "POST /sessions", "GET /audit") and
// status code. A request no route matched counts as route "unmatched".
func (m *Metrics) Instrument(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			route := r.Pattern
			if route == "" || route == "/" {
				route = "unmatched"
			}
			code := sw.code
			if code == 0 {
				code = http.StatusOK
			}
			m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter records the status code. Unwrap keeps
// http.ResponseController (deadlines, flushes) working through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Serve listens on addr and serves GET /metrics until ctx ends. It returns
// once the listener is open (an error naming addr otherwise); the address
// actually bound is returned (addr may say port 0).
func (m *Metrics) Serve(ctx context.Context, addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("metrics endpoint %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener closed under us: nothing left to serve
		}
	}()
	return ln.Addr().String(), nil
}
