//go:build linux

package daemon

import (
	"net/http"
	"os/user"
	"slices"
	"strconv"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/session"
)

// access is what a route requires of its caller. authorize checks it
// before the route's handler runs, from the kernel's account of the peer
// (SO_PEERCRED, its pidfd, its cgroup) and never from the request, so
// that no handler decides on its own who may call it.
type access struct {
	kind accessKind
	// what names the action in a refusal ("creating a session").
	what string
}

type accessKind int

const (
	accessPublic accessKind = iota
	accessPeer
	accessLocated
	accessOutside
	accessOwner
	accessManaged
)

var (
	// public: anyone connected (GET /health).
	public = access{kind: accessPublic}
	// anyPeer: any peer the kernel described; the handler shows the caller
	// only what is theirs (caller.admin: everything).
	anyPeer = access{kind: accessPeer}
	// locatedPeer: anyPeer, with caller.session the session the peer
	// process is in ("" for none).
	locatedPeer = access{kind: accessLocated}
	// sessionOwner: the session the {id} path value names exists and the
	// caller may act on it (caller.target, caller.entry).
	sessionOwner = access{kind: accessOwner}
)

// outsideSessions refuses callers inside any session: what they ask
// would let a confined process act beyond its boundary.
func outsideSessions(what string) access { return access{kind: accessOutside, what: what} }

// inManagedSession admits only callers inside a session this daemon
// created or attached (caller.session, caller.managed): its policy judges
// what they ask.
func inManagedSession(what string) access { return access{kind: accessManaged, what: what} }

// caller is the authorized sender of a request, as authorize established
// it for the route's access.
type caller struct {
	*Peer
	s *Server
	// session is the session the peer process is in ("" for none), for
	// locatedPeer and inManagedSession; managed is its state
	// (inManagedSession).
	session string
	managed *managed
	// target is the session the path names and entry its registry entry
	// (sessionOwner).
	target string
	entry  session.Entry
}

// admin reports whether the caller may see and act on everyone's sessions
// and approvals.
func (c *caller) admin() bool { return c.s.isAdmin(c.Peer) }

// handlerFunc serves a request authorize has admitted.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *caller)

// authorize is the one authorization middleware: every route goes
// through it, and its handler runs only when the caller has the access
// the route requires. A refusal is answered here.
func (s *Server) authorize(a access, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.authorized(r, a)
		if err != nil {
			writeError(w, err)
			return
		}
		h(w, r, c)
	})
}

func (s *Server) authorized(r *http.Request, a access) (*caller, error) {
	c := &caller{s: s}
	if a.kind == accessPublic {
		return c, nil
	}
	p, err := requestPeer(r)
	if err != nil {
		return nil, err
	}
	c.Peer = p
	switch a.kind {
	case accessLocated:
		c.session, err = s.sessionOf(p)
	case accessOutside:
		err = s.outsideSession(p, a.what)
	case accessOwner:
		c.target = r.PathValue("id")
		c.entry, err = s.ownedSession(p, c.target)
	case accessManaged:
		c.session, c.managed, err = s.managedSessionOf(p, a.what)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// managedSessionOf returns the session the peer is in and its state, or
// why what cannot be asked from where the peer is.
func (s *Server) managedSessionOf(p *Peer, what string) (string, *managed, error) {
	sid, err := s.sessionOf(p)
	if err != nil {
		return "", nil, err
	}
	if sid == "" {
		return "", nil, errorf(http.StatusBadRequest, "bad_request", "%s only works from inside a session (caller pid %d is in none); outside one, just run the command", what, p.PID)
	}
	s.mu.Lock()
	m := s.sessions[sid]
	s.mu.Unlock()
	if m == nil {
		return "", nil, errorf(http.StatusConflict, "conflict", "session %s was not created by this daemon, so it has no policy here to judge the request", sid)
	}
	return sid, m, nil
}

// requestPeer returns the request's kernel-reported peer.
func requestPeer(r *http.Request) (*Peer, error) {
	c := connOf(r.Context())
	if c == nil {
		return nil, errorf(http.StatusInternalServerError, "internal", "no peer credentials for this connection")
	}
	return &c.peer, nil
}

// isAdmin reports whether p is root or in the --admin-group (its primary
// group, or a supplementary group the kernel lists for the process).
func (s *Server) isAdmin(p *Peer) bool {
	if p.UID == 0 {
		return true
	}
	if s.adminGID < 0 {
		return false
	}
	if p.GID == s.adminGID {
		return true
	}
	groups, err := p.groups()
	return err == nil && slices.Contains(groups, s.adminGID)
}

// sessionOf returns the session the peer process is in ("" for none),
// confirmed against its pidfd so that a reused pid cannot answer for it.
func (s *Server) sessionOf(p *Peer) (string, error) {
	id, ok, err := cgroup.SessionOf(s.opts.Cgroup, p.PID)
	if err != nil {
		return "", errorf(http.StatusForbidden, "forbidden", "cannot tell which session pid %d is in: %v", p.PID, err)
	}
	if !p.alive() {
		return "", errorf(http.StatusForbidden, "forbidden", "peer pid %d exited during the request", p.PID)
	}
	if !ok {
		return "", nil
	}
	return id, nil
}

// outsideSession refuses a peer inside a session; what names the action.
func (s *Server) outsideSession(p *Peer, what string) error {
	id, err := s.sessionOf(p)
	if err != nil {
		return err
	}
	if id != "" {
		return errorf(http.StatusForbidden, "forbidden", "%s is not allowed from inside a session (caller pid %d is in session %s)", what, p.PID, id)
	}
	return nil
}

// ownedSession returns the registry entry of id if p may act on it.
func (s *Server) ownedSession(p *Peer, id string) (session.Entry, error) {
	if err := cgroup.ValidateSessionID(id); err != nil {
		return session.Entry{}, errorf(http.StatusBadRequest, "bad_request", "%v", err)
	}
	e, rerr := s.opts.Registry.Get(id)
	_, gerr := cgroup.OpenSession(s.opts.Cgroup, id)
	if rerr != nil && gerr != nil {
		return e, errorf(http.StatusNotFound, "not_found", "no such session %q", id)
	}
	if s.isAdmin(p) {
		return e, nil
	}
	if rerr != nil || e.UID != p.UID {
		// Same answer as for a missing session would leak nothing more,
		// but a clear refusal is more useful to the user.
		return e, errorf(http.StatusForbidden, "forbidden", "session %s does not belong to uid %d", id, p.UID)
	}
	mine, err := s.sessionOf(p)
	if err != nil {
		return e, err
	}
	if mine != "" && mine != id {
		return e, errorf(http.StatusForbidden, "forbidden", "a process in session %s cannot act on session %s", mine, id)
	}
	return e, nil
}

// userOf looks up the peer's account: home and name come from the user
// database, the groups from the kernel's view of the peer process.
func userOf(p *Peer) (credential, *user.User, error) {
	u, err := user.LookupId(strconv.Itoa(p.UID))
	if err != nil {
		return credential{}, nil, errorf(http.StatusForbidden, "forbidden", "uid %d has no entry in the user database: %v", p.UID, err)
	}
	groups, err := p.groups()
	if err != nil {
		return credential{}, nil, errorf(http.StatusForbidden, "forbidden", "%v", err)
	}
	return credential{UID: p.UID, GID: p.GID, Groups: groups}, u, nil
}
