//go:build linux

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/audit/bpfring"
	"github.com/openoxide/oxsupervise/loader"
)

// ROViewConfig configures NewROViewLayer.
type ROViewConfig struct {
	// Events is the ring buffer shared with the other BPF layers; nil
	// opens one for this layer alone.
	Events *bpfring.Ring
	// Warn receives warnings (audit records that could not be written,
	// lost kernel events).
	Warn io.Writer
	// Flood tunes the per-session flood control, in the kernel and in
	// front of the audit sink.
	Flood audit.FloodOptions
	// Pinned, when set, is where the program and maps are pinned already
	// (Objects), loaded and verified, to open instead of loading them;
	// Events must then be the ring their event maps belong to.
	Pinned string
	// Linger keeps the program attached this long after the last applied
	// session ends, for a session that comes within it to find it
	// attached: attaching and detaching each rewrite the system call exit
	// path on every CPU (0.1-3.7 ms each in a VM), which a supervisor that
	// serves one session after another (the daemon) would otherwise pay
	// per session. Zero detaches it as the last session ends.
	Linger time.Duration
	// AfterFunc schedules the end of a linger (time.AfterFunc's, when
	// nil): the returned function cancels it. Tests end lingers with it.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// ROViewLayer is the SessionLayer LayerReadOnlyViewAudit: the audit of
// the read-only view's refusals (bpf/roview.c). The Landlock path's mount
// view refuses writes and metadata changes outside the writable roots with
// EROFS before any LSM runs; this layer reports each of them as a denial
// of layer read-only-view. It refuses nothing itself.
//
// Its program runs on the exit of every system call of the machine, so it
// is attached only while at least one session is applied, and for the
// Linger of ROViewConfig after the last one.
type ROViewLayer struct {
	objs loader.ROViewObjects
	ev   kernelEvents
	// calls names each system call number (event.reason).
	calls map[int]loader.ROViewCall

	mu sync.Mutex
	// link is the attached program, nil while it is not attached.
	link link.Link
	// detached is closed once the link of the last session's end is
	// closed: detaching rewrites the kernel's system call exit path on
	// every CPU (~1 ms), so it runs alongside the rest of the session's
	// teardown; the next attach and Close wait for it, and Close
	// returns detachErr.
	detached  chan struct{}
	detachErr error
	// linger and afterFunc are ROViewConfig's Linger and AfterFunc.
	linger    time.Duration
	afterFunc func(time.Duration, func()) func() bool
	// stopLinger cancels the linger under way (nil when none), whose end
	// detaches the program. lingers counts the lingers started: an end
	// that fired as its linger was cancelled finds another number there.
	stopLinger func() bool
	lingers    uint64
}

// The rule of every read-only view denial.
const roviewRule = "read-only outside the writable roots"

// NewROViewLayer loads the program, unattached. An error means EROFS
// refusals cannot be audited on this kernel (no raw tracepoints, no ring
// buffer).
func NewROViewLayer(cfg ROViewConfig) (*ROViewLayer, error) {
	l := &ROViewLayer{calls: loader.ROViewTable(), linger: cfg.Linger, afterFunc: cfg.AfterFunc,
		ev: kernelEvents{src: loader.SourceROView, layer: audit.LayerReadOnlyView, what: "read-only view", flood: cfg.Flood}}
	if l.afterFunc == nil {
		l.afterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	if err := newKernelEvents(&l.ev, cfg.Events, cfg.Warn); err != nil {
		return nil, err
	}
	load := loader.LoadROView
	if cfg.Pinned != "" {
		load = func(objs *loader.ROViewObjects, events *loader.EventMaps) error {
			return loader.LoadPinnedROView(objs, events, cfg.Pinned)
		}
	}
	if err := load(&l.objs, l.ev.ring.Maps()); err != nil {
		l.ev.closeAll(func() error { return nil })
		return nil, err
	}
	// Attaching is what a kernel without raw tracepoints refuses: try it
	// now, so that the layer is only built where it works. Pinned objects
	// were pinned only after this very program attached on this kernel
	// (bpffs lives one boot), so they are not tried again: a trial
	// attach and detach patches the kernel's syscall exit path twice.
	if cfg.Pinned == "" {
		lk, err := loader.AttachROView(&l.objs)
		if err != nil {
			l.objs.Close()
			l.ev.closeAll(func() error { return nil })
			return nil, err
		}
		lk.Close()
	}
	l.ev.record = func(es *eventSession, _ bpfring.Header, raw []byte) (*audit.Record, error) {
		e, err := loader.DecodeROView(raw)
		if err != nil {
			return nil, err
		}
		return l.record(e, es.id, es.mode, time.Now()), nil
	}
	l.ev.forget = l.forget
	return l, nil
}

// Name implements SessionLayer.
func (l *ROViewLayer) Name() string { return LayerReadOnlyViewAudit }

// activatesBeforeExec: the launcher's own setup of the mount view is not
// the session's doing; its refusals are reported from the exec gate on.
func (l *ROViewLayer) activatesBeforeExec() {}

// Apply starts reporting s's EROFS refusals, attaching the program for
// the first session.
func (l *ROViewLayer) Apply(ctx context.Context, s SessionInfo) (func(context.Context) error, error) {
	if s.Policy == nil {
		return nil, errors.New("no policy")
	}
	es, err := l.ev.open(s)
	if err != nil {
		return nil, err
	}
	if err := l.add(s.CgroupID); err != nil {
		l.ev.abort(s.CgroupID)
		return nil, err
	}
	es.rules = true
	return func(context.Context) error { return l.ev.end(s.CgroupID) }, nil
}

func (l *ROViewLayer) add(cgroupID uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.objs.RoviewSessions.Put(cgroupID, uint32(0)); err != nil {
		return fmt.Errorf("read-only view audit of cgroup %d: %w", cgroupID, err)
	}
	l.cancelLinger()
	if l.link != nil {
		return nil
	}
	l.waitDetached()
	lk, err := loader.AttachROView(&l.objs)
	if err != nil {
		l.objs.RoviewSessions.Delete(cgroupID)
		return err
	}
	l.link = lk
	return nil
}

// attachAhead attaches the program before Run applies the layer at the
// exec gate (it calls this while the launcher starts), so that applying
// it there only adds the session: attaching rewrites the kernel's system
// call exit path on every CPU. Until the session is added the program
// finds no session of its own and reports nothing. The returned function
// detaches it again when no session is applied by then (the session
// failed before its gate).
func (l *ROViewLayer) attachAhead() (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// A session is coming: a linger under way ends without detaching.
	l.cancelLinger()
	if l.link == nil {
		l.waitDetached()
		lk, err := loader.AttachROView(&l.objs)
		if err != nil {
			// Apply attaches at the gate, and says why it cannot.
			return func() {}
		}
		l.link = lk
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.detachIfIdle()
	}
}

// forget drops a session and detaches the program after the last one.
func (l *ROViewLayer) forget(cgroupID uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.objs.RoviewSessions.Delete(cgroupID)
	if err != nil {
		err = fmt.Errorf("drop read-only view audit of cgroup %d: %w", cgroupID, err)
	}
	l.detachIfIdle()
	return err
}

// detachIfIdle detaches the program when no session is applied (l.mu
// held): at the end of the layer's linger when it has one, else now.
func (l *ROViewLayer) detachIfIdle() {
	if l.link == nil || !l.idle() {
		return
	}
	if l.linger <= 0 {
		l.detach()
		return
	}
	if l.stopLinger != nil {
		return
	}
	l.lingers++
	n := l.lingers
	l.stopLinger = l.afterFunc(l.linger, func() { l.lingerEnded(n) })
}

// idle reports whether no session is applied (l.mu held).
func (l *ROViewLayer) idle() bool {
	var key uint64
	return l.objs.RoviewSessions.NextKey(nil, &key) != nil
}

// lingerEnded ends linger number n: the program is detached unless a
// session came meanwhile (which cancelled it, or is applied now). It
// detaches before it returns, on the timer's goroutine, off any session's
// path; a session that comes meanwhile waits for the detach and attaches
// again.
func (l *ROViewLayer) lingerEnded(n uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n != l.lingers || l.stopLinger == nil {
		return
	}
	l.stopLinger = nil
	if l.link == nil || !l.idle() {
		return
	}
	l.detach()
	l.waitDetached()
}

// cancelLinger cancels the linger under way, if any (l.mu held).
func (l *ROViewLayer) cancelLinger() {
	if l.stopLinger != nil {
		l.stopLinger()
		l.stopLinger = nil
		l.lingers++
	}
}

// detach starts detaching the program (l.mu held). What it runs from now
// until the link is closed finds no session and reports nothing.
func (l *ROViewLayer) detach() {
	lk, done := l.link, make(chan struct{})
	l.link, l.detached = nil, done
	go func() {
		defer close(done)
		if err := lk.Close(); err != nil {
			l.detachErr = errors.Join(l.detachErr, fmt.Errorf("detach the read-only view audit: %w", err))
		}
	}()
}

// waitDetached waits for the detach forget started, if any (l.mu held).
func (l *ROViewLayer) waitDetached() {
	if l.detached != nil {
		<-l.detached
		l.detached = nil
	}
}

// Attached reports whether the program runs now (some session applied,
// or the linger after the last one under way).
func (l *ROViewLayer) Attached() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.link != nil
}

// Close removes every session still applied and unloads the program.
func (l *ROViewLayer) Close() error {
	return l.ev.closeAll(func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.cancelLinger()
		l.waitDetached()
		err := l.detachErr
		if l.link != nil {
			err = errors.Join(err, l.link.Close())
			l.link = nil
		}
		return errors.Join(err, l.objs.Close())
	})
}

// record builds the audit record of one EROFS refusal.
func (l *ROViewLayer) record(e *loader.ROViewEvent, session, mode string, now time.Time) *audit.Record {
	op := loader.ROViewOp(e.Op)
	call, known := l.calls[int(e.Nr)]
	reason := fmt.Sprintf("system call %d", e.Nr)
	if known {
		reason = call.Name
	}
	r := &audit.Record{
		Timestamp: now,
		Event:     audit.Event{Action: op.String(), Reason: reason},
		Process: &audit.Process{PID: int(e.Pid), Name: e.CommName(), CommandLine: e.CommandLine(),
			Thread: &audit.Thread{ID: int(e.Tid)}},
		User: &audit.User{ID: fmt.Sprint(e.Uid)},
		Ox: audit.Ox{Kind: audit.KindDenial, Session: session, Layer: audit.LayerReadOnlyView, Class: audit.ClassFile,
			Errno: int(unix.EROFS), Rule: roviewRule, Mode: mode},
	}
	if e.Ppid != 0 {
		r.Process.Parent = &audit.Parent{PID: int(e.Ppid)}
	}
	p := e.Paths()
	if p.Path == "" {
		r.Message = fmt.Sprintf("%s refused with EROFS: %s", reason, roviewRule)
		return r
	}
	r.File = &audit.File{Path: p.Path}
	r.Message = fmt.Sprintf("%s %s refused: %s", op, p.Path, roviewRule)
	switch {
	case p.Path2 != "" && op == loader.ROViewOpRename:
		r.Message = fmt.Sprintf("rename %s to %s refused: %s", p.Path, p.Path2, roviewRule)
	case p.Path2 != "" && op == loader.ROViewOpSymlink:
		r.Message = fmt.Sprintf("symlink %s -> %s refused: %s", p.Path, p.Path2, roviewRule)
	case p.Path2 != "" && op == loader.ROViewOpLink:
		r.Message = fmt.Sprintf("link %s to %s refused: %s", p.Path, p.Path2, roviewRule)
	}
	if p.Relative {
		r.Message += " (the path is relative: its directory was not found)"
	}
	if p.Truncated {
		r.Message += " (the path lost its leading components)"
	}
	return r
}
