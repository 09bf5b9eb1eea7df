//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/bpfring"
	"github.com/openoxide/oxsupervise/fsguard"
	"github.com/openoxide/oxsupervise/loader"
)

// FSConfig configures NewFSLayer.
type FSConfig struct {
	// Events is the ring buffer shared with the other BPF layers; nil
	// opens one for this layer alone.
	Events *bpfring.Ring
	// Warn receives warnings (audit records that could not be written,
	// lost kernel events).
	Warn io.Writer
	// Flood tunes the per-session flood control, in the kernel and in
	// front of the audit sink.
	Flood audit.FloodOptions
	// Pinned, when set, is where the programs are pinned already,
	// reporting through Events (package host): they are opened from
	// there instead of loaded again.
	Pinned string
}

// FSLayer is the SessionLayer LayerBPFLSM: BPF-LSM filesystem and
// self-protection rules (package fsguard) keyed by the session's cgroup,
// and the audit record of every refusal they report, plus events_lost
// records when the kernel could not hand refusals over.
//
// Once a session is active its tasks can no longer mount, call bpf(2) or
// reach tasks outside. Run's launcher builds a private mount namespace
// inside the session cgroup, so run activates this layer only after the
// launcher reports its mounts done and before it execs (see
// activatesBeforeExec); attach activates it before moving any process in.
//
// The programs and the event reader live in this process: when it closes,
// enforcement ends.
type FSLayer struct {
	guard *fsguard.Guard
	ev    kernelEvents
}

// NewFSLayer loads and attaches the filesystem programs. Call it only
// where BPF-LSM is usable (loader.ProbeBPFLSM); an error means it is not.
func NewFSLayer(cfg FSConfig) (*FSLayer, error) {
	l := &FSLayer{ev: kernelEvents{src: loader.SourceFS, layer: audit.LayerBPFLSM, what: "filesystem", flood: cfg.Flood}}
	if err := newKernelEvents(&l.ev, cfg.Events, cfg.Warn); err != nil {
		return nil, err
	}
	load := fsguard.Load
	if cfg.Pinned != "" {
		load = func(events *loader.EventMaps) (*fsguard.Guard, error) { return fsguard.LoadPinned(events, cfg.Pinned) }
	}
	g, err := load(l.ev.ring.Maps())
	if err != nil {
		l.ev.closeAll(func() error { return nil })
		return nil, err
	}
	l.guard = g
	l.ev.record = func(es *eventSession, _ bpfring.Header, raw []byte) (*audit.Record, error) {
		ev, err := g.Decode(raw)
		if err != nil {
			if es.created != nil {
				// It may have been a creation the end's check needs.
				es.created.Incomplete(fmt.Sprintf("a filesystem event of session %s could not be decoded", es.id))
			}
			return nil, err
		}
		if ev.CheckAtEnd {
			reportCreated(es, ev, l.ev.warn)
			return nil, nil
		}
		return fsRecord(ev, es.id, es.mode, time.Now()), nil
	}
	l.ev.forget = g.RemoveSession
	return l, nil
}

// Name implements SessionLayer.
func (l *FSLayer) Name() string { return LayerBPFLSM }

// Hooks names the LSM hooks the programs are attached to.
func (l *FSLayer) Hooks() []string { return l.guard.Hooks() }

// activatesBeforeExec marks the layer for run's exec gate: its rules
// refuse mounts, so it must not be active while the launcher builds the
// session's mount namespace.
func (l *FSLayer) activatesBeforeExec() {}

// Apply starts enforcing s.Policy's filesystem rules (and the session's
// writes to its own /dev/shm, s.PrivateShm) for s's cgroup and opens the session's audit sink (s.Policy.Audit.Path, default
// audit.DefaultPath). An audit log that cannot be opened is a warning:
// audit is observability, not the boundary.
func (l *FSLayer) Apply(ctx context.Context, s SessionInfo) (func(context.Context) error, error) {
	if s.Policy == nil {
		return nil, errors.New("no policy")
	}
	es, err := l.ev.open(s)
	if err != nil {
		return nil, err
	}
	var private []fsguard.PrivateMount
	if s.PrivateShm != nil {
		private = append(private, fsguard.PrivateMount{Path: "/dev/shm", Root: s.PrivateShm})
	}
	if err := l.guard.AddSessionWith(s.CgroupID, s.Policy, fsguard.SessionOptions{CheckAtEnd: s.Created != nil, Private: private}); err != nil {
		l.ev.abort(s.CgroupID)
		return nil, err
	}
	es.rules = s.Policy.FilesystemRules
	return func(context.Context) error { return l.ev.end(s.CgroupID) }, nil
}

// Close removes every session still applied and detaches the programs.
// Tasks still in those sessions lose their filesystem confinement, so
// callers kill the sessions first.
func (l *FSLayer) Close() error {
	return l.ev.closeAll(l.guard.Close)
}

// reportCreated hands an entry the programs let the session create to the
// session's check at its end, by a path that check can open.
func reportCreated(es *eventSession, ev fsguard.Event, warn io.Writer) {
	switch {
	case es.created == nil:
		// The programs report these only for sessions that asked.
		fmt.Fprintf(warn, "oxsupervise: warning: session %s created %s, which nothing checks\n", es.id, ev.Path)
	case ev.PathTruncated || !filepath.IsAbs(ev.Path):
		es.created.Incomplete(fmt.Sprintf("session %s created an entry no mount shows (%s)", es.id, ev.Path))
	default:
		es.created.Created(ev.Path)
	}
}

// fsActions maps fsguard's operations onto the schema's event.action
// vocabulary (the one Landlock records use too); the precise operation
// stays in event.reason.
var fsActions = map[fsguard.Op]string{
	fsguard.OpOpenWrite: "open", fsguard.OpOpenRead: "open",
	fsguard.OpLinkSource: "link", fsguard.OpLink: "link",
	fsguard.OpRenameSource: "rename", fsguard.OpRenameTarget: "rename",
}

// fsRecord builds the audit record of one refusal.
func fsRecord(ev fsguard.Event, session, mode string, now time.Time) *audit.Record {
	action, ok := fsActions[ev.Op]
	if !ok {
		action = ev.Op.String()
	}
	class := audit.ClassFile
	if ev.Kind == fsguard.KindSelf {
		class = audit.ClassSelfProtection
	}
	r := &audit.Record{
		Timestamp: now,
		Event:     audit.Event{Action: action, Reason: ev.Op.String() + ": " + ev.Kind.String()},
		Ox: audit.Ox{Kind: audit.KindDenial, Session: session, Layer: audit.LayerBPFLSM, Class: class,
			Errno: int(ev.Errno), Rule: ev.Rule, Mode: mode},
	}
	if ev.PID != 0 {
		r.Process = &audit.Process{PID: int(ev.PID), Name: ev.Comm, Thread: &audit.Thread{ID: int(ev.TID)}}
		if ev.PPID != 0 {
			r.Process.Parent = &audit.Parent{PID: int(ev.PPID)}
		}
		r.User = &audit.User{ID: fmt.Sprint(ev.UID)}
	}
	switch {
	case class == audit.ClassSelfProtection && ev.TargetPID != 0:
		r.Message = fmt.Sprintf("%s of pid %d refused: %s", ev.Op, ev.TargetPID, ev.Rule)
	case class == audit.ClassSelfProtection:
		r.Message = fmt.Sprintf("%s refused: %s", ev.Op, ev.Rule)
	default:
		r.File = &audit.File{Path: ev.Path, Device: fmt.Sprintf("%d:%d", unix.Major(ev.Dev), unix.Minor(ev.Dev)), Inode: ev.Ino}
		r.Message = fmt.Sprintf("%s %s refused: %s", ev.Op, ev.Path, ev.Rule)
	}
	return r
}
