//go:build linux

package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

// maxOwners bounds the remembered owners of ended sessions.
const maxOwners = 65536

// noteOwner remembers who owns session id, so that the records of a
// session that has ended can still be shown to its owner (GET /audit).
func (s *Server) noteOwner(id string, uid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.owners) >= maxOwners {
		// Forgetting hides old sessions' records from their owners (root
		// still sees them); it never shows them to anyone else.
		clear(s.owners)
	}
	s.owners[id] = uid
}

// mayRead reports whether uid may read the records of session id: its
// owner only. Records without a session (the daemon's own) and sessions
// nobody here knows the owner of are for root and admins.
func (s *Server) mayRead(uid int, id string) bool {
	if id == "" {
		return false
	}
	s.mu.Lock()
	if m := s.sessions[id]; m != nil {
		s.mu.Unlock()
		return m.cred.UID == uid
	}
	owner, ok := s.owners[id]
	s.mu.Unlock()
	if ok {
		return owner == uid
	}
	e, err := s.opts.Registry.Get(id)
	return err == nil && e.Kind != "" && e.UID == uid
}

// parseAuditQuery decodes and checks GET /audit's query strictly.
func parseAuditQuery(v url.Values) (AuditQuery, error) {
	var q AuditQuery
	for k, vals := range v {
		if len(vals) != 1 {
			return q, errorf(http.StatusBadRequest, "bad_request", "query parameter %q given %d times", k, len(vals))
		}
		val := vals[0]
		if err := checkStr(k, val); err != nil {
			return q, errorf(http.StatusBadRequest, "bad_request", "%v", err)
		}
		switch k {
		case "follow":
			switch val {
			case "1", "true":
				q.Follow = true
			case "0", "false", "":
			default:
				return q, errorf(http.StatusBadRequest, "bad_request", "follow: %q is not 1 or 0", val)
			}
		case "session":
			q.Session = val
		case "op":
			q.Op = val
		case "pid":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return q, errorf(http.StatusBadRequest, "bad_request", "pid: %q is not a process id", val)
			}
			q.PID = n
		case "since":
			t, err := time.Parse(time.RFC3339Nano, val)
			if err != nil {
				return q, errorf(http.StatusBadRequest, "bad_request", "since: %q is not an RFC 3339 time", val)
			}
			q.Since = t
		default:
			return q, errorf(http.StatusBadRequest, "unknown_field", "unknown query parameter %q (want follow, session, pid, op, since)", k)
		}
	}
	return q, nil
}

// auditTail streams the daemon's audit records (GET /audit) as the
// newline-delimited JSON lines of the log: root and admins get every
// record, a user only those of their own sessions. With follow it goes on
// until the client disconnects.
func (s *Server) auditTail(w http.ResponseWriter, r *http.Request, who *caller) {
	p := who.Peer
	q, err := parseAuditQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	admin := who.admin()
	filter := audit.Filter{Session: q.Session, PID: q.PID, Op: q.Op, Since: q.Since}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	opts := audit.TailOptions{
		Follow:  q.Follow,
		History: !q.Follow || !q.Since.IsZero(),
		OnError: func(err error) { s.log.Printf("audit tail for uid %d: %v", p.UID, err) },
	}
	buf := make([]byte, 0, 4096)
	err = audit.Tail(r.Context(), s.opts.AuditPath, opts, func(rec audit.Record, line []byte) error {
		if !filter.Match(&rec) || !admin && !s.mayRead(p.UID, rec.Ox.Session) {
			return nil
		}
		buf = append(append(buf[:0], line...), '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil && !errors.Is(err, context.Canceled) && r.Context().Err() == nil {
		// The stream has begun: the error can only be logged.
		s.log.Printf("audit tail for uid %d: %v", p.UID, err)
	}
}
