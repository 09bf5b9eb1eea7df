//go:build linux

package audit

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openoxide/oxsupervise/internal/procfs"
)

// procInfo is what /proc tells about a pid.
type procInfo struct {
	exe, cmdline, name string
	ppid               int
	// nameOnly: only stat (name, ppid) was read, as for an ancestor
	// beyond the parent, whose record names nothing more.
	nameOnly bool
}

// ProcEnricher returns an Enrich function for SinkOptions that fills empty
// process.executable, process.command_line, process.name and
// process.parent.pid from /proc/PID, naming every filled field in
// oxsupervise.enriched. It never overwrites a producer's value. Reading
// /proc/PID/cmdline can block on the target's mm lock, so the reads run in
// a goroutine bounded by timeout and by a limit of concurrent lookups; a
// slow or exited pid just leaves the fields empty.
func ProcEnricher(timeout time.Duration) func(*Record) {
	return NewEnricher(timeout).Enrich
}

// Enricher is ProcEnricher's state: what /proc said about recent pids.
// Prefetch reads a pid and its ancestry ahead of the record that will
// need them: a supervisor prefetches itself while its session starts, so
// session_start (whose command is the supervisor's child) reads /proc for
// the command alone.
type Enricher struct {
	procRoot string
	timeout  time.Duration
	// At most this many lookups may be stuck at once; beyond that records
	// go out unenriched rather than piling up goroutines.
	slots chan struct{}
	mu    sync.Mutex
	cache map[int]cachedProc
}

// NewEnricher returns an Enricher whose reads of one record give up after
// timeout.
func NewEnricher(timeout time.Duration) *Enricher {
	return newEnricher("/proc", timeout)
}

func newEnricher(procRoot string, timeout time.Duration) *Enricher {
	return &Enricher{procRoot: procRoot, timeout: timeout, slots: make(chan struct{}, 4), cache: map[int]cachedProc{}}
}

// A burst of refusals comes from a few pids: what /proc said about a pid
// is reused for procCacheTTL instead of three reads per record (a pid
// being reused within that second is as unlikely as it is harmless to a
// field already labelled a guess). The cache is emptied when it reaches
// procCacheMax pids.
const (
	procCacheTTL = time.Second
	procCacheMax = 1024
)

type cachedProc struct {
	info procInfo
	at   time.Time
}

// lookup reads what /proc says about pid, giving up at deadline: all of
// it, or with nameOnly its stat alone (no executable or command line:
// those reads cost the most, and cmdline's can block on the target's mm
// lock).
func (e *Enricher) lookup(pid int, deadline time.Time, nameOnly bool) (procInfo, bool) {
	e.mu.Lock()
	c, ok := e.cache[pid]
	e.mu.Unlock()
	if ok && time.Since(c.at) < procCacheTTL && (nameOnly || !c.info.nameOnly) {
		return c.info, true
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return procInfo{}, false
	}
	select {
	case e.slots <- struct{}{}:
	default:
		return procInfo{}, false
	}
	done := make(chan procInfo, 1)
	go func() {
		defer func() { <-e.slots }()
		done <- readProc(e.procRoot, pid, nameOnly)
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case info := <-done:
		e.mu.Lock()
		if len(e.cache) >= procCacheMax {
			clear(e.cache)
		}
		// A name read does not replace a fresh full read of the pid.
		if old, ok := e.cache[pid]; !info.nameOnly || !ok || old.info.nameOnly || time.Since(old.at) >= procCacheTTL {
			e.cache[pid] = cachedProc{info: info, at: time.Now()}
		}
		e.mu.Unlock()
		return info, true
	case <-timer.C:
		return procInfo{}, false
	}
}

// Prefetch reads pid and its ancestry into the cache (as Enrich would for
// a record of pid's child), within the same timeout.
func (e *Enricher) Prefetch(pid int) {
	e.Enrich(&Record{Process: &Process{PID: pid, Parent: &Parent{PID: pid}}})
}

// Enrich fills r (see ProcEnricher).
func (e *Enricher) Enrich(r *Record) {
	p := r.Process
	if p == nil || p.PID <= 0 {
		return
	}
	// One deadline for the whole record, the ancestry included.
	deadline := time.Now().Add(e.timeout)
	fill := func(field *string, val, name string) {
		if *field == "" && val != "" {
			*field = val
			r.Ox.Enriched = append(r.Ox.Enriched, name)
		}
	}
	// A process that has exited leaves its own fields empty; a parent
	// the kernel named still gives the chain.
	if info, ok := e.lookup(p.PID, deadline, false); ok {
		fill(&p.Executable, info.exe, "process.executable")
		fill(&p.CommandLine, info.cmdline, "process.command_line")
		fill(&p.Name, info.name, "process.name")
		if p.Parent == nil && info.ppid > 0 {
			p.Parent = &Parent{PID: info.ppid}
			r.Ox.Enriched = append(r.Ox.Enriched, "process.parent.pid")
		}
	}
	if p.Parent == nil || p.Parent.PID <= 1 || len(r.Ox.Ancestry) > 0 {
		return
	}
	// The chain starts from the parent the record names: the
	// producer's, when it gave one, is what the kernel said.
	// Only the parent's executable is recorded: the ancestors beyond it
	// are read for their name and parent alone.
	var chain []Ancestor
	for pid := p.Parent.PID; pid > 1 && len(chain) < MaxAncestry; {
		a, ok := e.lookup(pid, deadline, len(chain) > 0)
		if !ok || a.name == "" {
			break
		}
		if len(chain) == 0 {
			fill(&p.Parent.Name, a.name, "process.parent.name")
			fill(&p.Parent.Executable, a.exe, "process.parent.executable")
		}
		chain = append(chain, Ancestor{PID: pid, Name: a.name})
		if a.ppid == pid {
			break
		}
		pid = a.ppid
	}
	if len(chain) > 0 {
		r.Ox.Ancestry = chain
		r.Ox.Enriched = append(r.Ox.Enriched, "oxsupervise.ancestry")
	}
}

func readProc(procRoot string, pid int, nameOnly bool) procInfo {
	dir := procRoot + "/" + strconv.Itoa(pid)
	info := procInfo{nameOnly: nameOnly}
	if !nameOnly {
		if exe, err := os.Readlink(dir + "/exe"); err == nil {
			info.exe = exe
		}
		if b, err := os.ReadFile(dir + "/cmdline"); err == nil {
			info.cmdline = strings.Join(strings.FieldsFunc(string(bytes.TrimRight(b, "\x00")), func(r rune) bool { return r == 0 }), " ")
		}
	}
	if b, err := os.ReadFile(dir + "/stat"); err == nil {
		if st, err := procfs.ParseStat(b); err == nil {
			info.name, info.ppid = st.Comm, st.PPID
		}
	}
	return info
}
