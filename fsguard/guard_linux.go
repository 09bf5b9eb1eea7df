//go:build linux

package fsguard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/openoxide/oxsupervise/internal/mountinfo"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
)

// Guard owns the loaded filesystem programs and the sessions in their maps.
type Guard struct {
	progs   *loader.FSPrograms
	anchors *loader.AnchorResolver

	mu       sync.Mutex
	sessions map[uint64]*session
}

// session remembers what AddSession wrote, to remove it and to explain
// events.
type session struct {
	id      uint64 // cgroup id
	anchors []loader.FSAnchorKey
	names   []loader.FSNameKey
	rules   []string // by fs_rule.id
	nfa     *nfa
	pattern []policy.ProtectedPattern
	scopes  []loader.FSAnchorKey // deny-read glob scopes
	globs   []globSlot
	globSrc []policy.NameGlob
}

// Load loads and attaches the filesystem programs, which report refusals
// through events (package audit/bpfring reads them; Decode explains
// them). Nothing is enforced until AddSession; Close detaches everything.
func Load(events *loader.EventMaps) (*Guard, error) {
	progs, err := loader.LoadFS(events)
	if err != nil {
		return nil, err
	}
	return newGuard(progs)
}

// newGuard is a Guard of progs, which it closes on error.
func newGuard(progs *loader.FSPrograms) (*Guard, error) {
	anchors, err := loader.LoadAnchorResolver()
	if err != nil {
		progs.Close()
		return nil, err
	}
	return &Guard{progs: progs, anchors: anchors, sessions: map[uint64]*session{}}, nil
}

// Hooks names the LSM hooks the programs are attached to.
func (g *Guard) Hooks() []string { return g.progs.Attached }

// SkippedHooks maps optional hooks this kernel lacks to the reason; the
// operations they guard are covered by older hooks.
func (g *Guard) SkippedHooks() map[string]string { return g.progs.Skipped }

func userDev(kdev uint32) uint64 {
	return unix.Mkdev(kdev>>20, kdev&(1<<20-1))
}

// PrivateMount is a filesystem mounted only in the session's own mount
// namespace, which the session may write: run's private /dev/shm
// (launcher.NewPrivateShm). No path of the policy names it, and its
// files' d_parent walk ends at its root, so its root becomes a writable
// anchor. On a filesystem mounted anywhere else that would make all of it
// writable there too; for a tmpfs of the session's own it is exactly the
// session's.
type PrivateMount struct {
	// Path is where the session sees it, for the rule's name.
	Path string
	// Root is an open file of its root in this process (the fsmount(2)
	// descriptor).
	Root *os.File
}

// SessionOptions are what AddSessionWith knows of a session beyond its
// policy.
type SessionOptions struct {
	// CheckAtEnd lets the session create entries of CheckedAtEnd patterns
	// (a worktree's .git file), each reported in an Event with CheckAtEnd
	// set: the caller promises to check every one when the session ends
	// (package quarantine). A creation the programs cannot report is
	// refused. Without it such entries are refused like every protected
	// one.
	CheckAtEnd bool
	// Private are filesystems mounted only in the session's own mount
	// namespace that it may write (its private /dev/shm).
	Private []PrivateMount
}

// AddSession is AddSessionWith without options: every protected entry is
// refused, CheckedAtEnd ones included.
func (g *Guard) AddSession(cgroupID uint64, c *policy.Compiled) error {
	return g.AddSessionWith(cgroupID, c, SessionOptions{})
}

// AddSessionWith starts enforcing c for every task in cgroup cgroupID,
// and lets it write below each of opts.Private. It writes the session
// entry last, so the programs never see a session
// with half its rules; on error nothing of the session remains. A policy
// without filesystem rules (full-access, external-sandbox) adds nothing.
func (g *Guard) AddSessionWith(cgroupID uint64, c *policy.Compiled, opts SessionOptions) error {
	if c == nil {
		return errors.New("add filesystem session: nil policy")
	}
	if !c.FilesystemRules {
		return nil
	}
	n, err := compilePatterns(c.ProtectedPatterns)
	if err != nil {
		return fmt.Errorf("add filesystem session for cgroup %d: %w", cgroupID, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.sessions[cgroupID]; ok {
		return fmt.Errorf("add filesystem session: cgroup %d already has one", cgroupID)
	}

	globs, err := compileGlobs(c.DenyReadGlobs)
	if err != nil {
		return fmt.Errorf("add filesystem session for cgroup %d: %w", cgroupID, err)
	}
	s := &session{id: cgroupID, nfa: n, pattern: c.ProtectedPatterns, globs: globs, globSrc: c.DenyReadGlobs}
	restricted := c.ReadAccess == policy.ReadAccessRestricted
	var readable []policy.Anchor
	if restricted {
		readable = withSubmounts(c.ReadableRoots)
	}
	unixSockets, err := socketAnchors(c.Network.AllowUnixSockets)
	if err != nil {
		return fmt.Errorf("add filesystem session for cgroup %d: %w", cgroupID, err)
	}
	var anchors []kindedAnchor
	// Weakest first: a later, stronger kind wins for an inode listed twice.
	for _, set := range []struct {
		anchors []policy.Anchor
		kind    Kind
		what    string
	}{
		{readable, KindReadable, "readable root"},
		{c.WritableRoots, KindWritable, "writable root"},
		{c.ProtectedPaths, KindProtected, "protected path"},
		{unixSockets, KindUnix, "allowed unix socket"},
		{c.DenyRead, KindDenyRead, "denied read"},
	} {
		for _, a := range set.anchors {
			if a.Exists {
				anchors = append(anchors, kindedAnchor{a, set.kind, set.what})
			}
		}
	}
	ids, err := g.kernelIdentities(anchors)
	if err != nil {
		return fmt.Errorf("add filesystem session for cgroup %d: %w", cgroupID, err)
	}
	rules := map[loader.FSAnchorKey]loader.FSRule{}
	for i, a := range anchors {
		key := loader.FSAnchorKey{CgroupId: cgroupID, Ino: ids[i].Ino, Dev: ids[i].Dev}
		rules[key] = loader.FSRule{Kind: uint32(a.kind), Id: uint32(len(s.rules))}
		s.rules = append(s.rules, fmt.Sprintf("%s %s (%s)", a.what, a.Path, sourceOr(a.Source)))
	}
	privateIDs, err := g.privateIdentities(opts.Private)
	if err != nil {
		return fmt.Errorf("add filesystem session for cgroup %d: %w", cgroupID, err)
	}
	for i, m := range opts.Private {
		key := loader.FSAnchorKey{CgroupId: cgroupID, Ino: privateIDs[i].Ino, Dev: privateIDs[i].Dev}
		if _, ok := rules[key]; ok {
			return fmt.Errorf("add filesystem session for cgroup %d: the session's own %s is also an anchor of its policy: it is not private", cgroupID, m.Path)
		}
		rules[key] = loader.FSRule{Kind: uint32(KindWritable), Id: uint32(len(s.rules))}
		s.rules = append(s.rules, fmt.Sprintf("writable root %s (the session's own tmpfs)", m.Path))
	}

	for key, rule := range rules {
		if err := g.progs.Anchors.Update(key, rule, ebpf.UpdateNoExist); err != nil {
			g.removeLocked(s)
			return fmt.Errorf("add filesystem session for cgroup %d: write anchor %s: %w", cgroupID, s.rules[rule.Id], err)
		}
		s.anchors = append(s.anchors, key)
	}
	for name, bits := range n.names {
		key := loader.FSNameKey{CgroupId: cgroupID}
		for i := 0; i < len(name); i++ {
			key.Name[i] = int8(name[i])
		}
		if err := g.progs.Names.Update(key, loader.FSNameBits{Bits: bits}, ebpf.UpdateNoExist); err != nil {
			g.removeLocked(s)
			return fmt.Errorf("add filesystem session for cgroup %d: write protected name %q: %w", cgroupID, name, err)
		}
		s.names = append(s.names, key)
	}
	if err := g.addGlobScopes(cgroupID, s); err != nil {
		g.removeLocked(s)
		return fmt.Errorf("add filesystem session for cgroup %d: %w", cgroupID, err)
	}
	sess := loader.FSSession{Start: n.start, Final: n.final, Wildcard: n.wildcard, DirOnly: n.dirOnly, FileOnly: n.fileOnly}
	if opts.CheckAtEnd {
		sess.CheckedAtEnd = n.checkedAtEnd
	}
	sess.Nglobs = uint32(len(globs))
	for k, slot := range globs {
		sess.Globs[k] = slot.bpf()
	}
	if restricted {
		sess.Flags |= sessionRestrictedRead
	}
	if c.Network.Policy != policy.NetFull {
		sess.Flags |= sessionInetOnly
	}
	if err := g.progs.Sessions.Update(cgroupID, sess, ebpf.UpdateNoExist); err != nil {
		g.removeLocked(s)
		return fmt.Errorf("add filesystem session for cgroup %d: %w", cgroupID, err)
	}
	g.sessions[cgroupID] = s
	return nil
}

// privateIdentities resolves the roots of private mounts as the
// programs' walk meets them.
func (g *Guard) privateIdentities(private []PrivateMount) ([]loader.AnchorID, error) {
	if len(private) == 0 {
		return nil, nil
	}
	fds := make([]int, len(private))
	for i, m := range private {
		if m.Root == nil {
			return nil, fmt.Errorf("the session's own %s: no open root given", m.Path)
		}
		fds[i] = int(m.Root.Fd())
	}
	byFD, err := g.anchors.Resolve(fds)
	if err != nil {
		return nil, fmt.Errorf("the session's own mounts: %w", err)
	}
	ids := make([]loader.AnchorID, len(fds))
	for i, fd := range fds {
		ids[i] = byFD[fd]
	}
	return ids, nil
}

// RemoveSession stops enforcing for cgroupID. The session entry goes
// first, so the programs never judge by a half-removed rule set.
func (g *Guard) RemoveSession(cgroupID uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.sessions[cgroupID]
	if !ok {
		return fmt.Errorf("remove filesystem session: cgroup %d has none", cgroupID)
	}
	var errs []error
	if err := g.progs.Sessions.Delete(cgroupID); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, fmt.Errorf("delete session entry: %w", err))
	}
	errs = append(errs, g.removeLocked(s))
	delete(g.sessions, cgroupID)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove filesystem session for cgroup %d: %w", cgroupID, err)
	}
	return nil
}

func (g *Guard) removeLocked(s *session) error {
	var errs []error
	for _, k := range s.anchors {
		if err := g.progs.Anchors.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete anchor: %w", err))
		}
	}
	for _, k := range s.names {
		if err := g.progs.Names.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete protected name: %w", err))
		}
	}
	for _, k := range s.scopes {
		if err := g.progs.GlobScopes.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete deny-read glob scope: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Decode explains one record of the filesystem programs (source
// loader.SourceFS of the shared ring buffer): the rule that refused is
// named while its session exists.
func (g *Guard) Decode(sample []byte) (Event, error) {
	var raw loader.FSEvent
	if len(sample) < int(unsafe.Sizeof(raw)) {
		return Event{}, fmt.Errorf("filesystem event of %d bytes, want %d", len(sample), unsafe.Sizeof(raw))
	}
	if err := binary.Read(bytes.NewReader(sample), binary.NativeEndian, &raw); err != nil {
		return Event{}, fmt.Errorf("decode filesystem event: %w", err)
	}
	return g.decode(&raw), nil
}

// eventAbstract is bpf/fs.h's FS_EVENT_ABSTRACT: the path holds an
// abstract socket's name (bpf/unix.c), not dentry names.
const eventAbstract = 1 << 2

// eventCheckAtEnd is bpf/fs.h's FS_EVENT_CHECK_AT_END: not a refusal but a
// creation let through for the check at the session's end.
const eventCheckAtEnd = 1 << 3

func (g *Guard) decode(raw *loader.FSEvent) Event {
	e := Event{
		CgroupID:      raw.Hdr.CgroupId,
		PID:           raw.Pid,
		TID:           raw.Tid,
		UID:           raw.Uid,
		Comm:          cString(raw.Comm[:]),
		Op:            Op(raw.Op),
		Errno:         syscall.Errno(raw.Errno),
		Dev:           userDev(raw.Dev),
		Ino:           raw.Ino,
		NewEntry:      raw.Flags&(1<<1) != 0,
		CheckAtEnd:    raw.Flags&eventCheckAtEnd != 0,
		PathTruncated: raw.Flags&1 != 0,
		Kind:          Kind(raw.Kind),
		Depth:         raw.Depth,
		Suppressed:    raw.Hdr.Suppressed,
	}
	off := min(int(raw.PathOff), len(raw.Path))
	buf := make([]byte, off)
	for i := range buf {
		buf[i] = byte(raw.Path[i])
	}
	// An abstract socket's name: no dentry, nothing to place on a mount.
	abstract := raw.Flags&eventAbstract != 0
	e.TargetPID = raw.TargetPid
	e.PPID = raw.Ppid
	e.Family = raw.Family
	switch {
	case e.Kind == KindSelf:
		// Not about a file: no path.
	case abstract:
		e.Path = "@" + strings.ReplaceAll(string(buf), "\x00", "@")
	case e.PathTruncated:
		// The walk's upper part is unknown: no mount can place it.
		e.Path = ".../" + strings.Join(componentsLeafFirst(buf), "/")
	default:
		e.Path = mountedPath(raw.Dev, "/"+strings.Join(componentsLeafFirst(buf), "/"))
	}

	g.mu.Lock()
	s := g.sessions[raw.Hdr.CgroupId]
	g.mu.Unlock()
	switch {
	case s == nil:
		e.Rule = "unknown (session removed)"
	case e.Kind == KindPattern:
		var parts []string
		for _, i := range s.nfa.patterns(raw.Matched) {
			p := s.pattern[i]
			parts = append(parts, fmt.Sprintf("protected pattern %s (%s)", strings.Join(p.Components, "/"), sourceOr(p.Source)))
		}
		e.Rule = strings.Join(parts, "; ")
	case e.Kind == KindDenyGlob:
		var parts []string
		for k, slot := range s.globs {
			if raw.Matched[0]&(1<<k) != 0 && slot.excludeOf < 0 {
				src := s.globSrc[slot.source]
				parts = append(parts, fmt.Sprintf("deny-read glob %s below %s (%s)", src.Include, src.Within, sourceOr(src.Source)))
			}
		}
		e.Rule = strings.Join(parts, "; ")
	case e.Kind == KindOutside && e.Op == OpOpenRead:
		e.Rule = "read_access = restricted: no readable or writable root above the entry"
	case e.Kind == KindUnixPeer:
		e.Rule = "abstract AF_UNIX socket created outside the session and the sessions nested below it"
	case e.Kind == KindOutside && e.Op == OpUnixConnect:
		e.Rule = "AF_UNIX socket outside the writable roots and not in network.allow_unix_sockets"
	case e.Kind == KindOutside:
		e.Rule = "no writable root above the entry"
	case e.Kind == KindSelf && e.Op == OpSocket:
		e.Rule = fmt.Sprintf("address family %d: outside what the network policy covers (unix, inet, inet6, netlink)", e.Family)
	case e.Kind == KindSelf:
		e.Rule = "self-protection: a session may not reach outside itself"
	case e.Kind == KindDepth:
		e.Rule = fmt.Sprintf("entry deeper than %d levels: refused", raw.Depth)
	case int(raw.RuleId) < len(s.rules):
		e.Rule = s.rules[raw.RuleId]
	}
	return e
}

// mountedPath turns a path relative to the root of filesystem kdev into
// one the supervisor can open, through the mount that shows it.
func mountedPath(kdev uint32, fsPath string) string {
	mounts, err := mountinfo.Read()
	if err != nil {
		return "fsroot:" + fsPath
	}
	best, bestRoot := "", ""
	found := false
	for _, m := range mounts {
		if m.Major != kdev>>20 || m.Minor != kdev&(1<<20-1) {
			continue
		}
		if m.Root != "/" && fsPath != m.Root && !strings.HasPrefix(fsPath, m.Root+"/") {
			continue
		}
		// The mount showing most of the filesystem names the entry the
		// way its own tree does, not by an alias.
		if !found || len(m.Root) < len(bestRoot) {
			found, best, bestRoot = true, m.Point, m.Root
		}
	}
	if !found {
		return "fsroot:" + fsPath
	}
	if bestRoot == "/" {
		return path.Join(best, fsPath)
	}
	return path.Join(best, strings.TrimPrefix(fsPath, bestRoot))
}

// Close detaches the programs: every session stops being enforced.
func (g *Guard) Close() error {
	return errors.Join(g.progs.Close(), g.anchors.Close())
}
