//go:build linux

package audit

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procInfo is what /proc tells about a pid.
type procInfo struct {
	exe, cmdline, name string
	ppid               int
}

// ProcEnricher returns an Enrich function for SinkOptions that fills empty
// process.executable, process.command_line, process.name and
// process.parent.pid from /proc/PID, naming every filled field in
// oxsupervise.enriched. It never overwrites a producer's value. Reading
// /proc/PID/cmdline can block on the target's mm lock, so the reads run in
// a goroutine bounded by timeout and by a limit of concurrent lookups; a
// slow or exited pid just leaves the fields empty.
func ProcEnricher(timeout time.Duration) func(*Record) {
	return procEnricher("/proc", timeout)
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

func procEnricher(procRoot string, timeout time.Duration) func(*Record) {
	// At most this many lookups may be stuck at once; beyond that records
	// go out unenriched rather than piling up goroutines.
	slots := make(chan struct{}, 4)
	var (
		mu    sync.Mutex
		cache = map[int]cachedProc{}
	)
	lookup := func(pid int) (procInfo, bool) {
		mu.Lock()
		c, ok := cache[pid]
		mu.Unlock()
		if ok && time.Since(c.at) < procCacheTTL {
			return c.info, true
		}
		select {
		case slots <- struct{}{}:
		default:
			return procInfo{}, false
		}
		done := make(chan procInfo, 1)
		go func() {
			defer func() { <-slots }()
			done <- readProc(procRoot, pid)
		}()
		select {
		case info := <-done:
			mu.Lock()
			if len(cache) >= procCacheMax {
				clear(cache)
			}
			cache[pid] = cachedProc{info: info, at: time.Now()}
			mu.Unlock()
			return info, true
		case <-time.After(timeout):
			return procInfo{}, false
		}
	}
	return func(r *Record) {
		p := r.Process
		if p == nil || p.PID <= 0 {
			return
		}
		if p.Executable != "" && p.CommandLine != "" && p.Name != "" && p.Parent != nil {
			return
		}
		info, ok := lookup(p.PID)
		if !ok {
			return
		}
		if p.Executable == "" && info.exe != "" {
			p.Executable = info.exe
			r.Ox.Enriched = append(r.Ox.Enriched, "process.executable")
		}
		if p.CommandLine == "" && info.cmdline != "" {
			p.CommandLine = info.cmdline
			r.Ox.Enriched = append(r.Ox.Enriched, "process.command_line")
		}
		if p.Name == "" && info.name != "" {
			p.Name = info.name
			r.Ox.Enriched = append(r.Ox.Enriched, "process.name")
		}
		if p.Parent == nil && info.ppid > 0 {
			p.Parent = &Parent{PID: info.ppid}
			r.Ox.Enriched = append(r.Ox.Enriched, "process.parent.pid")
		}
	}
}

func readProc(procRoot string, pid int) procInfo {
	dir := procRoot + "/" + strconv.Itoa(pid)
	var info procInfo
	if exe, err := os.Readlink(dir + "/exe"); err == nil {
		info.exe = exe
	}
	if b, err := os.ReadFile(dir + "/cmdline"); err == nil {
		info.cmdline = strings.Join(strings.FieldsFunc(string(bytes.TrimRight(b, "\x00")), func(r rune) bool { return r == 0 }), " ")
	}
	if b, err := os.ReadFile(dir + "/stat"); err == nil {
		info.name, info.ppid = parseStat(b)
	}
	return info
}

// parseStat extracts comm and ppid from /proc/PID/stat; comm may contain
// spaces and parentheses, so it is delimited by the last ')'.
func parseStat(b []byte) (comm string, ppid int) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0
	}
	comm = string(b[open+1 : end])
	fields := strings.Fields(string(b[end+1:]))
	if len(fields) >= 2 {
		ppid, _ = strconv.Atoi(fields[1])
	}
	return comm, ppid
}
