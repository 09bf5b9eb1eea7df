//go:build linux

package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/host"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// DefaultStateDir holds what the daemon must remember about a session to
// answer for it after a restart (its user and compiled policy).
const DefaultStateDir = "/run/oxsupervise/daemon"

// DefaultPinDir is where BPF maps and links are pinned so that enforcement
// outlives the daemon (see package host).
const DefaultPinDir = host.DefaultPinDir

type managedState struct {
	ID        string           `json:"id"`
	UID       int              `json:"uid"`
	GID       int              `json:"gid"`
	Groups    []int            `json:"groups"`
	Home      string           `json:"home"`
	User      string           `json:"user"`
	Workspace string           `json:"workspace"`
	Policy    *policy.Compiled `json:"policy"`
}

func (s *Server) stateDir() string {
	if s.opts.StateDir != "" {
		return s.opts.StateDir
	}
	return DefaultStateDir
}

// remember records m in memory, for the requests of its session.
func (s *Server) remember(m *managed) {
	s.mu.Lock()
	s.sessions[m.id] = m
	s.mu.Unlock()
}

// persist saves m on disk (root-only), so that a daemon restarted during
// an attach session can still judge its requests (adopt). Only attach
// sessions are saved: a run session does not outlive its daemon (its
// command is the daemon's child and dies with it; what it left in its
// group is stopped by the next daemon, which never adopts a run session
// whose supervisor is gone), so saving its compiled policy would be work
// on every run's start that nobody reads.
func (s *Server) persist(m *managed) {
	st := managedState{ID: m.id, UID: m.cred.UID, GID: m.cred.GID, Groups: m.cred.Groups, Home: m.home,
		User: m.userName, Workspace: m.workspace, Policy: m.policy}
	b, err := json.Marshal(st)
	if err == nil {
		err = os.MkdirAll(s.stateDir(), 0o700)
	}
	if err == nil {
		p := filepath.Join(s.stateDir(), m.id+".json")
		if err = os.WriteFile(p+".tmp", b, 0o600); err == nil {
			err = os.Rename(p+".tmp", p)
		}
	}
	if err != nil {
		s.log.Printf("session %s: state not saved (a restarted daemon will not know its policy): %v", m.id, err)
	}
}

func (s *Server) forget(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	delete(s.sessions, id)
	delete(s.calls, id)
	s.mu.Unlock()
	os.Remove(filepath.Join(s.stateDir(), id+".json"))
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// adopt reconciles what a previous daemon (or crashed supervisors) left:
// attach sessions that still have processes are adopted with their saved
// state; run sessions whose supervisor is dead are stopped (nobody can
// return their exit status, and their command was killed with the
// supervisor); records without a group and empty groups without a record
// are removed. Groups with processes but no record are left alone and
// reported: they may be an attach in progress by a standalone CLI.
func (s *Server) adopt(ctx context.Context) []string {
	var notes []string
	// A crashed daemon's slot, or a standalone run's killed before its
	// session started: its launcher died with it (parent-death signal),
	// its group is left.
	slots, err := session.RemoveSlots(s.opts.Cgroup)
	for _, id := range slots {
		notes = append(notes, fmt.Sprintf("adopt: removed the session slot %s a dead supervisor left", id))
	}
	if err != nil {
		notes = append(notes, fmt.Sprintf("adopt: %v", err))
	}
	list, err := session.List(s.opts.Cgroup, s.opts.Registry)
	if err != nil {
		notes = append(notes, fmt.Sprintf("adopt: %v", err))
	}
	live := map[string]bool{}
	var alive []session.Status
	for _, st := range list {
		switch {
		case st.State == "stale":
			s.opts.Registry.Delete(st.ID)
			notes = append(notes, fmt.Sprintf("adopt: removed stale record of session %s (its group is gone)", st.ID))
		case strings.HasPrefix(st.State, "no-registry"):
			if len(st.Procs) == 0 && s.olderThanGrace(st.Cgroup) {
				session.Stop(ctx, s.opts.Cgroup, s.opts.Registry, st.ID)
				notes = append(notes, fmt.Sprintf("adopt: removed empty unrecorded group %s", st.ID))
			} else if len(st.Procs) == 0 {
				notes = append(notes, fmt.Sprintf("adopt: empty unrecorded group %s is younger than %s (a session being created?); left alone", st.ID, s.grace()))
			} else {
				live[st.ID] = true
				alive = append(alive, st)
				notes = append(notes, fmt.Sprintf("adopt: group %s has %d processes but no record; left alone", st.ID, len(st.Procs)))
			}
		case st.Kind == session.KindRun && !processAlive(st.SupervisorPID):
			session.Stop(ctx, s.opts.Cgroup, s.opts.Registry, st.ID)
			notes = append(notes, fmt.Sprintf("adopt: stopped run session %s: its supervisor (pid %d) is gone", st.ID, st.SupervisorPID))
		case st.Kind == session.KindAttach && len(st.Procs) == 0:
			session.Stop(ctx, s.opts.Cgroup, s.opts.Registry, st.ID)
			notes = append(notes, fmt.Sprintf("adopt: removed attach session %s: no process left", st.ID))
		default:
			live[st.ID] = true
			alive = append(alive, st)
		}
	}
	byID := map[string]session.Status{}
	for _, st := range alive {
		byID[st.ID] = st
	}
	entries, _ := os.ReadDir(s.stateDir())
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		p := filepath.Join(s.stateDir(), e.Name())
		if !live[id] {
			os.Remove(p)
			continue
		}
		var st managedState
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil || st.Policy == nil || st.ID != id {
			notes = append(notes, fmt.Sprintf("adopt: session %s: unreadable state %s: %v", id, p, err))
			continue
		}
		s.mu.Lock()
		s.sessions[id] = &managed{id: id, cred: credential{UID: st.UID, GID: st.GID, Groups: st.Groups},
			home: st.Home, userName: st.User, policy: st.Policy, workspace: st.Workspace}
		s.mu.Unlock()
		notes = append(notes, fmt.Sprintf("adopt: session %s (uid %d) adopted", id, st.UID))
		if status, ok := byID[id]; ok && status.Kind == session.KindAttach {
			if err := s.reapply(ctx, status, st.Policy); err != nil {
				session.Stop(ctx, s.opts.Cgroup, s.opts.Registry, id)
				s.forget(id)
				notes = append(notes, fmt.Sprintf("adopt: STOPPED attach session %s: its rules cannot be applied again (%v); it would otherwise run unconfined", id, err))
			} else {
				notes = append(notes, fmt.Sprintf("adopt: session %s: layers applied again", id))
			}
		}
	}
	notes = append(notes, s.retirePinned(ctx)...)
	if s.enf.pinErr != nil {
		if _, err := os.Stat(s.pinDir()); err == nil {
			notes = append(notes, fmt.Sprintf("adopt: %s exists but this daemon cannot pin (%v): whatever is pinned there is left alone", s.pinDir(), s.enf.pinErr))
		} else if !errors.Is(err, fs.ErrNotExist) {
			notes = append(notes, fmt.Sprintf("adopt: %s: %v", s.pinDir(), err))
		}
	}
	return notes
}

// defaultAdoptGrace is how old an unrecorded empty group must be before a
// starting daemon removes it: a standalone `run` or `attach` creates the
// group a moment before it writes the record.
const defaultAdoptGrace = time.Minute

func (s *Server) grace() time.Duration {
	if s.opts.adoptGrace != 0 {
		return s.opts.adoptGrace
	}
	return defaultAdoptGrace
}

func (s *Server) olderThanGrace(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && time.Since(fi.ModTime()) >= s.grace()
}

func (s *Server) pinDir() string {
	if s.opts.PinDir != "" {
		return s.opts.PinDir
	}
	return DefaultPinDir
}

// retirePinned retires the pinned generations earlier daemons left, once
// the adopted sessions hold their rules in this daemon's generation (adopt
// applied them again). Until then both generations are attached, and a
// hook refuses when either does, so no session is unconfined in between.
// A session that is still alive and was confined by an old generation but
// holds no rules in the new one (its saved policy was unreadable, or this
// daemon cannot build the layer) is stopped first: retiring would
// otherwise leave it unconfined. A generation whose session map cannot be
// read is kept, and said so: nobody can tell which sessions it confines.
// Entries of sessions whose group is gone go away with their generation.
func (s *Server) retirePinned(ctx context.Context) []string {
	var notes []string
	live := map[uint64]string{}
	// Without a complete list of the live sessions, retiring could drop
	// the rules of one that is not on it: keep every older generation.
	var listErr error
	if len(s.enf.pins) > 0 {
		var ids []string
		ids, listErr = cgroup.ListSessions(s.opts.Cgroup)
		for _, id := range ids {
			g, err := cgroup.OpenSession(s.opts.Cgroup, id)
			if err != nil {
				listErr = errors.Join(listErr, err)
				continue
			}
			live[g.CgroupID] = id
		}
	}
	if s.enf.pinErr == nil {
		for _, spec := range []pinSpec{fsPins(), netPins()} {
			if s.enf.pinnedSet(spec.layer) != nil {
				continue
			}
			// This daemon has no such layer pinned: what earlier daemons
			// pinned is the only thing confining their sessions.
			gens, _ := loader.PinSet{Dir: filepath.Join(s.pinDir(), spec.set)}.Generations()
			for _, g := range gens {
				notes = append(notes, fmt.Sprintf("pins: %s: KEPT generation %s: this daemon has no pinned %s layer to take over its sessions", spec.layer, g.Dir, spec.layer))
			}
		}
	}
	for _, p := range s.enf.pins {
		if len(p.old) == 0 {
			continue
		}
		if listErr != nil {
			notes = append(notes, fmt.Sprintf("pins: %s: KEPT %d older generations: cannot tell which sessions are alive: %v", p.spec.layer, len(p.old), listErr))
			continue
		}
		current, err := p.gen.SessionKeys(p.spec.sessionsMap)
		if err != nil {
			notes = append(notes, fmt.Sprintf("pins: %s: kept %d older generations: %v", p.spec.layer, len(p.old), err))
			continue
		}
		held := map[uint64]bool{}
		for _, k := range current {
			held[k] = true
		}
		for _, g := range p.old {
			keys, err := g.SessionKeys(p.spec.sessionsMap)
			if err != nil {
				notes = append(notes, fmt.Sprintf("pins: %s: KEPT generation %s, which cannot tell which sessions it confines (%v); remove it once they ended", p.spec.layer, g.Dir, err))
				continue
			}
			for _, k := range keys {
				id, alive := live[k]
				if !alive || held[k] {
					continue
				}
				s.enf.release(ctx, k)
				session.Stop(ctx, s.opts.Cgroup, s.opts.Registry, id)
				s.forget(id)
				delete(live, k)
				s.zl.Error().Str("session", id).Str("layer", p.spec.layer).
					Msg("stopped the session: the previous daemon's pinned rules confined it, and they could not be applied again; it would otherwise run without them")
				notes = append(notes, fmt.Sprintf("pins: STOPPED session %s: its %s rules could not be applied again", id, p.spec.layer))
			}
			s.reportUnaudited(p.spec, g)
			if err := g.Remove(); err != nil {
				notes = append(notes, fmt.Sprintf("pins: %s: %v", p.spec.layer, err))
				continue
			}
			notes = append(notes, fmt.Sprintf("pins: %s: retired generation %s (%d session entries) after adoption", p.spec.layer, g.Dir, len(keys)))
		}
	}
	return notes
}

// reportUnaudited writes one audit record per layer for the refusals g's
// programs reported while no daemon read them (after a crash or kill -9):
// they were enforced, but nobody can say more about them than how many
// there were. The layers share one ring buffer, pinned in each of their
// generations: whichever is retired first drains it for both.
func (s *Server) reportUnaudited(spec pinSpec, g loader.Generation) {
	counts, err := g.DrainEvents()
	if err != nil {
		s.zl.Warn().Str("layer", spec.layer).Err(err).Msg("refusals of the previous daemon's programs not counted")
	}
	for _, src := range []pinSpec{fsPins(), netPins()} {
		n := counts[src.source]
		if n == 0 || s.sink == nil {
			continue
		}
		s.zl.Warn().Str("layer", src.layer).Uint64("refusals", n).
			Msg("refusals enforced by the pinned programs while no daemon read them are not audited individually")
		r := &audit.Record{
			Message: fmt.Sprintf("%d %s refusals were enforced by the pinned programs while no daemon read them and are not audited individually", n, src.layer),
			Ox:      audit.Ox{Kind: audit.KindEventsLost, Layer: src.audit, EventsLost: n},
		}
		if err := s.sink.Write(r); err != nil {
			s.zl.Warn().Err(err).Msg("audit record of unaudited refusals lost")
		}
	}
}
