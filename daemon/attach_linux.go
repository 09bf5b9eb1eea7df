//go:build linux

package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os/user"
	"strconv"
	"strings"

	"github.com/openoxide/oxsupervise/internal/procfs"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/doctor"
	"github.com/openoxide/oxsupervise/session"
)

// attach confines a running process of the caller's (POST
// /sessions/attach); the session outlives the request.
func (s *Server) attach(w http.ResponseWriter, r *http.Request, who *caller) {
	var req AttachRequest
	if err := DecodeRequest(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	p := who.Peer
	pidfd, err := unix.PidfdOpen(req.PID, 0)
	if err != nil {
		writeError(w, errorf(http.StatusNotFound, "not_found", "pid %d: no such process", req.PID))
		return
	}
	defer unix.Close(pidfd)
	status, err := procfs.ReadStatus(req.PID)
	if err != nil {
		writeError(w, errorf(http.StatusNotFound, "not_found", "pid %d: %v", req.PID, err))
		return
	}
	ruid, euid, gid := status.UID[procfs.Real], status.UID[procfs.Effective], status.GID[procfs.Real]
	// The owner was read through the pid number: it belongs to the process
	// the pidfd pins only if that process is still alive now (a pid is not
	// reused while its process exists). session.Attach checks the owner
	// again when it moves the tree.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		writeError(w, errorf(http.StatusNotFound, "not_found", "pid %d exited while being checked", req.PID))
		return
	}
	if (ruid != p.UID || euid != p.UID) && p.UID != 0 {
		writeError(w, errorf(http.StatusForbidden, "forbidden", "pid %d belongs to uid %d (real %d), not to the caller (uid %d): only its owner or root may attach it", req.PID, euid, ruid, p.UID))
		return
	}
	cred, u, err := userOf(p)
	if err != nil {
		writeError(w, err)
		return
	}
	if p.UID == 0 && euid != 0 {
		// Root confines someone else's process: the session, and any
		// approved command run for it, belong to that process's user.
		if tu, err := user.LookupId(strconv.Itoa(euid)); err == nil {
			u = tu
		}
		cred = credential{UID: euid, GID: gid}
	}
	var warn bytes.Buffer
	c, err := s.loadPolicy(cred, u.HomeDir, req.Policy, req.Dir, nil, nil, &warn)
	if err != nil {
		writeError(w, err)
		return
	}
	e, _, err := s.enf.host.Attach(r.Context(), session.AttachOptions{
		PID: req.PID, Policy: c, CallerUID: p.UID, AllowOtherUser: p.UID == 0, NetworkOnly: req.NetworkOnly,
		Warn: &warn, Unavailable: s.opts.Unavailable, Cgroup: s.opts.Cgroup, Registry: s.opts.Registry,
	}, s.enf.record)
	if err != nil {
		var be *session.BoundaryError
		if errors.As(err, &be) {
			s.refusedStart(be.Layer) // observe_linux.go
			msg := fmt.Sprintf("pid %d: boundary not built: %v; nothing was moved", req.PID, be)
			if rem := doctor.RefusalRemedy(err); rem != "" {
				msg += "\n" + strings.TrimRight(rem, "\n")
			}
			writeError(w, errorf(http.StatusInternalServerError, "boundary", "%s", msg))
			return
		}
		writeError(w, errorf(http.StatusConflict, "conflict", "attach pid %d: %v", req.PID, err))
		return
	}
	if e.UID != cred.UID {
		e.UID = cred.UID
		s.opts.Registry.Put(*e)
	}
	s.noteOwner(e.ID, cred.UID)
	m := &managed{id: e.ID, cgroupID: e.CgroupID, cred: cred, home: u.HomeDir, userName: u.Username, policy: c, workspace: c.Workspace.Path}
	s.remember(m)
	s.persist(m)
	s.log.Printf("session %s: uid %d attached pid %d", e.ID, p.UID, req.PID)
	s.work.Add(1)
	go s.watchAttached(e.ID, e.CgroupID)
	var warnings []string
	for _, l := range strings.Split(strings.TrimSpace(warn.String()), "\n") {
		if l != "" {
			warnings = append(warnings, l)
		}
	}
	writeJSON(w, http.StatusCreated, AttachResult{Session: *e, Warnings: warnings})
}
