package kernelaudit

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

// Event is the Landlock-relevant part of one kernel audit event: the
// records sharing one audit(TIME:SERIAL) stamp.
type Event struct {
	Serial    uint64
	Time      time.Time
	Access    []Fields // LANDLOCK_ACCESS records, in order
	Domain    Fields   // LANDLOCK_DOMAIN, when in this event
	Syscall   Fields   // SYSCALL, when the task had an audit context
	Proctitle string   // argv joined by spaces, from PROCTITLE
	// Seccomp is an AUDIT_SECCOMP record: a seccomp refusal, complete in
	// itself (acting pid, comm, exe, arch, syscall, action).
	Seccomp Fields
}

// domainInfo is what a LANDLOCK_DOMAIN "allocated" record said about the
// task that created the domain.
type domainInfo struct {
	pid                   int
	uid, exe, comm        string
	deallocatedAt         time.Time
	session               string
	sessionKnown, checked bool
}

type pendingEvent struct {
	ev       Event
	deadline time.Time
}

// assembler groups records into events. Only events that contain a
// Landlock record are kept: Landlock records precede the SYSCALL/EOE
// records of their event, so anything else can be dropped on arrival.
type assembler struct {
	timeout time.Duration
	pending map[uint64]*pendingEvent
	order   []uint64 // serials in arrival order, for deterministic flushing
	domains map[string]*domainInfo
	// sessionOfSes attributes by audit session id (Options); may be nil.
	sessionOfSes func(ses uint32) (string, bool)
}

func newAssembler(timeout time.Duration) *assembler {
	return &assembler{timeout: timeout, pending: map[uint64]*pendingEvent{}, domains: map[string]*domainInfo{}}
}

// add takes one record and returns the events it completed.
func (a *assembler) add(m Message, now time.Time) []Event {
	p := a.pending[m.Serial]
	switch m.Type {
	case TypeLandlockAccess, TypeLandlockDomain:
		if p == nil {
			p = &pendingEvent{ev: Event{Serial: m.Serial, Time: m.Time}, deadline: now.Add(a.timeout)}
			a.pending[m.Serial] = p
			a.order = append(a.order, m.Serial)
		}
		if m.Type == TypeLandlockAccess {
			p.ev.Access = append(p.ev.Access, m.Fields)
		} else {
			p.ev.Domain = m.Fields
			a.noteDomain(m.Fields, now)
		}
	case TypeSeccomp:
		if isSeccompRefusal(m.Fields) {
			return []Event{{Serial: m.Serial, Time: m.Time, Seccomp: m.Fields}}
		}
	case TypeSyscall:
		if p != nil {
			p.ev.Syscall = m.Fields
		}
	case TypeProctitle:
		if p != nil {
			v, _ := m.Fields.Get("proctitle")
			p.ev.Proctitle = strings.TrimSpace(strings.ReplaceAll(v, "\x00", " "))
		}
	case TypeEOE:
		if p != nil {
			delete(a.pending, m.Serial)
			return []Event{p.ev}
		}
	}
	return nil
}

// expire returns the events whose wait for more records is over, oldest
// first, and forgets domains deallocated long ago.
func (a *assembler) expire(now time.Time) []Event {
	var out []Event
	kept := a.order[:0]
	for _, serial := range a.order {
		p, ok := a.pending[serial]
		if !ok {
			continue // flushed by EOE
		}
		if now.Before(p.deadline) {
			kept = append(kept, serial)
			continue
		}
		delete(a.pending, serial)
		out = append(out, p.ev)
	}
	a.order = kept
	for id, d := range a.domains {
		if !d.deallocatedAt.IsZero() && now.Sub(d.deallocatedAt) > 10*a.timeout {
			delete(a.domains, id)
		}
	}
	return out
}

// take removes the pending events that match and returns them, oldest
// first: a session's drain flushes its events at once, since nothing of
// them can still arrive, while the other sessions' keep waiting.
func (a *assembler) take(match func(Event) bool) []Event {
	var out []Event
	kept := a.order[:0]
	for _, serial := range a.order {
		p, ok := a.pending[serial]
		if !ok {
			continue
		}
		if !match(p.ev) {
			kept = append(kept, serial)
			continue
		}
		delete(a.pending, serial)
		out = append(out, p.ev)
	}
	a.order = kept
	return out
}

// belongsTo reports whether ev is attributed to session (records' rules).
func (a *assembler) belongsTo(ev Event, sessionOf sessionFunc, session string) bool {
	recs, _ := a.records(ev, sessionOf, false)
	for _, r := range recs {
		if r.Ox.Session == session {
			return true
		}
	}
	return false
}

// noteDomain records the creator of a domain right away, so that events
// with their own serial (no audit context) can use it when they flush.
func (a *assembler) noteDomain(f Fields, now time.Time) {
	id, ok := f.Get("domain")
	if !ok {
		return
	}
	status, _ := f.Get("status")
	switch status {
	case "allocated":
		exe, _ := f.Get("exe")
		comm, _ := f.Get("comm")
		uid, _ := f.Get("uid")
		a.domains[id] = &domainInfo{pid: f.Int("pid"), exe: exe, comm: comm, uid: uid}
	case "deallocated":
		if d := a.domains[id]; d != nil {
			d.deallocatedAt = now
		}
	}
}

// blockerOps maps a Landlock blocker to the operation it refused and what
// the operation was about.
var blockerOps = map[string]struct {
	op    string
	class audit.Class
	errno int
}{
	"fs.execute":                 {"execute", audit.ClassFile, 13},
	"fs.write_file":              {"open", audit.ClassFile, 13},
	"fs.read_file":               {"open", audit.ClassFile, 13},
	"fs.read_dir":                {"open", audit.ClassFile, 13},
	"fs.remove_dir":              {"rmdir", audit.ClassFile, 13},
	"fs.remove_file":             {"unlink", audit.ClassFile, 13},
	"fs.make_char":               {"mknod", audit.ClassFile, 13},
	"fs.make_dir":                {"mkdir", audit.ClassFile, 13},
	"fs.make_reg":                {"create", audit.ClassFile, 13},
	"fs.make_sock":               {"mknod", audit.ClassFile, 13},
	"fs.make_fifo":               {"mknod", audit.ClassFile, 13},
	"fs.make_block":              {"mknod", audit.ClassFile, 13},
	"fs.make_sym":                {"symlink", audit.ClassFile, 13},
	"fs.refer":                   {"rename", audit.ClassFile, 18},
	"fs.truncate":                {"truncate", audit.ClassFile, 13},
	"fs.ioctl_dev":               {"ioctl", audit.ClassFile, 13},
	"net.bind_tcp":               {"bind", audit.ClassNetwork, 13},
	"net.connect_tcp":            {"connect", audit.ClassNetwork, 13},
	"scope.abstract_unix_socket": {"connect", audit.ClassNetwork, 1},
	"scope.signal":               {"kill", audit.ClassSelfProtection, 1},
}

// opFor picks the operation for a blocker list. fs.refer wins because a
// cross-directory rename or link is what it always means, even when the
// kernel lists a make_* right before it.
func opFor(blockers []string) (op string, class audit.Class, errno int) {
	for _, b := range blockers {
		if b == "fs.refer" {
			o := blockerOps[b]
			return o.op, o.class, o.errno
		}
	}
	for _, b := range blockers {
		if o, ok := blockerOps[b]; ok {
			return o.op, o.class, o.errno
		}
	}
	// A blocker newer than this table: still a refusal, reported as such.
	if len(blockers) > 0 {
		class := audit.ClassFile
		if !strings.HasPrefix(blockers[0], "fs.") {
			class = audit.ClassSelfProtection
		}
		return blockers[0], class, 13
	}
	return "unknown", audit.ClassFile, 13
}

// sessionFunc attributes a pid to a session.
type sessionFunc func(pid int) (string, bool)

// records converts an event into one audit.Record per refused access.
// unattributed counts the refusals that no session claimed (dropped unless
// keepAll).
func (a *assembler) records(ev Event, sessionOf sessionFunc, keepAll bool) (out []audit.Record, unattributed int) {
	if ev.Seccomp != nil {
		return seccompRecords(ev, sessionOf, a.sessionOfSes, keepAll)
	}
	var domain *domainInfo
	var proc *audit.Process
	var user *audit.User
	errnoFromSyscall := 0
	if ev.Syscall != nil {
		pid := ev.Syscall.Int("pid")
		exe, _ := ev.Syscall.Get("exe")
		comm, _ := ev.Syscall.Get("comm")
		proc = &audit.Process{PID: pid, Name: unknownEmpty(comm), Executable: unknownEmpty(exe), CommandLine: ev.Proctitle}
		if ppid := ev.Syscall.Int("ppid"); ppid > 0 {
			proc.Parent = &audit.Parent{PID: ppid}
		}
		if uid, ok := ev.Syscall.Get("uid"); ok {
			user = &audit.User{ID: uid}
		}
		if exit := ev.Syscall.Int("exit"); exit < 0 {
			errnoFromSyscall = -exit
		}
	}
	for _, acc := range ev.Access {
		domainID, _ := acc.Get("domain")
		if domain == nil {
			domain = a.domains[domainID]
		}
		blockersRaw, _ := acc.Get("blockers")
		blockers := strings.Split(blockersRaw, ",")
		op, class, errno := opFor(blockers)
		if errnoFromSyscall != 0 {
			errno = errnoFromSyscall
		}
		r := audit.Record{
			Timestamp: ev.Time,
			Event:     audit.Event{Action: op},
			Ox: audit.Ox{Kind: audit.KindDenial, Layer: audit.LayerLandlock, Class: class,
				Errno: errno, Rule: blockersRaw, LandlockDomain: domainID},
		}
		if proc != nil {
			p := *proc
			r.Process = &p
		}
		if user != nil {
			u := *user
			r.User = &u
		}
		if path, ok := acc.Get("path"); ok {
			r.File = &audit.File{Path: path}
			r.File.Device, _ = acc.Get("dev")
			r.File.Inode, _ = strconv.ParseUint(valueOf(acc, "ino"), 10, 64)
		}
		if dst := destination(acc); dst != nil {
			r.Destination = dst
			r.Network = &audit.Network{Transport: "tcp", Type: ipType(dst.IP)}
		}
		if proc == nil && domain != nil {
			r.Message = "acting pid unknown (the task had no syscall audit context); domain created by pid " +
				strconv.Itoa(domain.pid) + " (" + domain.exe + ")"
		}
		r.Ox.Session = a.attribute(proc, domain, sessionOf)
		if r.Ox.Session != "" && domainID != "" && a.domains[domainID] == nil {
			// The domain's own record (logged once, with its first
			// refusal) may have been lost; remember whose domain this is
			// so refusals of its processes stay attributed after they exit.
			a.domains[domainID] = &domainInfo{session: r.Ox.Session, sessionKnown: true, checked: true}
		}
		if r.Ox.Session == "" {
			unattributed++
			if !keepAll {
				continue
			}
		}
		out = append(out, r)
	}
	return out, unattributed
}

func (a *assembler) attribute(proc *audit.Process, domain *domainInfo, sessionOf sessionFunc) string {
	if proc != nil && proc.PID > 0 {
		if s, ok := sessionOf(proc.PID); ok {
			return s
		}
	}
	if domain != nil && domain.sessionKnown {
		return domain.session
	}
	if domain != nil && domain.pid > 0 {
		if !domain.checked {
			domain.session, domain.sessionKnown = sessionOf(domain.pid)
			// Cache only a hit: the creator may not have entered its
			// session's cgroup yet when its first refusal is read.
			domain.checked = domain.sessionKnown
		}
		if domain.sessionKnown {
			return domain.session
		}
	}
	return ""
}

func destination(f Fields) *audit.Destination {
	for _, keys := range [][2]string{{"daddr", "dest"}, {"saddr", "src"}} {
		addr, ok := f.Get(keys[0])
		if !ok {
			continue
		}
		ip, err := netip.ParseAddr(addr)
		if err != nil {
			continue
		}
		port, _ := strconv.ParseUint(valueOf(f, keys[1]), 10, 16)
		return &audit.Destination{IP: ip.Unmap(), Port: uint16(port)}
	}
	return nil
}

func ipType(ip netip.Addr) string {
	if ip.Is4() {
		return "ipv4"
	}
	return "ipv6"
}

func valueOf(f Fields, key string) string {
	v, _ := f.Get(key)
	return v
}

func unknownEmpty(v string) string {
	if v == "(null)" || v == "?" {
		return ""
	}
	return v
}
