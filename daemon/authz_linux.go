//go:build linux

package daemon

import (
	"net/http"
	"os/user"
	"strconv"

	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/session"
)

// requestPeer returns the request's kernel-reported peer.
func requestPeer(r *http.Request) (*Peer, error) {
	c := connOf(r.Context())
	if c == nil {
		return nil, errorf(http.StatusInternalServerError, "internal", "no peer credentials for this connection")
	}
	return &c.peer, nil
}

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
	if err != nil {
		return false
	}
	for _, g := range groups {
		if g == s.adminGID {
			return true
		}
	}
	return false
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

// outsideSession refuses requests from inside a session for endpoints that
// would let a confined process act beyond its boundary.
// outsidePeer authorizes a request that must come from outside every
// session (what names the action for the refusal) and decodes its body
// into req. It returns nil after writing the error response.
func (s *Server) outsidePeer(w http.ResponseWriter, r *http.Request, what string, req request) *Peer {
	p, err := requestPeer(r)
	if err == nil {
		err = s.outsideSession(p, what)
	}
	if err == nil {
		err = DecodeRequest(r.Body, req)
	}
	if err != nil {
		writeError(w, err)
		return nil
	}
	return p
}

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
