//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/openoxide/oxsupervise/audit"
	"github.com/openoxide/oxsupervise/cgroup"
	"github.com/openoxide/oxsupervise/egress"
	"github.com/openoxide/oxsupervise/loader"
	"github.com/openoxide/oxsupervise/policy"
	"github.com/openoxide/oxsupervise/session"
)

// auditLogCounts is what one session left in its audit log.
type auditLogCounts struct {
	denials     int
	lost        uint64
	suppressed  uint64
	first, last time.Time
}

// countAuditLog counts the denial records of layer in the log at path and
// the files it was rotated into.
func countAuditLog(path, layer string) (auditLogCounts, error) {
	var c auditLogCounts
	rotated, _ := filepath.Glob(path + ".*")
	for _, p := range append(rotated, path) {
		if err := c.add(p, layer); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *auditLogCounts) add(path, layer string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Time time.Time `json:"@timestamp"`
			Ox   struct {
				Kind       string `json:"kind"`
				Layer      string `json:"layer"`
				EventsLost uint64 `json:"events_lost"`
				Suppressed uint64 `json:"suppressed"`
			} `json:"oxsupervise"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return fmt.Errorf("%s: bad line: %w", path, err)
		}
		switch {
		case rec.Ox.Kind == "denial" && rec.Ox.Layer == layer:
			c.denials++
			if c.first.IsZero() || rec.Time.Before(c.first) {
				c.first = rec.Time
			}
			if rec.Time.After(c.last) {
				c.last = rec.Time
			}
		case rec.Ox.Kind == "events_lost":
			c.lost += rec.Ox.EventsLost
		case rec.Ox.Kind == "suppressed":
			c.suppressed += rec.Ox.Suppressed
		}
	}
	return sc.Err()
}

// auditSuite floods the kernel audit path with Landlock refusals from
// inside a real session and counts what reached the session's log file.
func auditSuite(ctx context.Context, e *env) ([]*report, error) {
	n := e.n(20000, 2000)
	rounds := e.n(3, 2)
	ws := filepath.Join(e.scratch, "audit-ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, err
	}
	target := fmt.Sprintf("/var/oxbench-denied-%d", os.Getpid())
	r := &report{ID: "audit", Title: "Audit: Landlock refusals, kernel audit -> supervisor -> JSON-lines file",
		Command: e.commandFor("audit"), Unit: "", Rounds: rounds,
		Headers: []string{"round", "load", "refusals generated", "denial records in file", "events_lost counted", "unaccounted", "generator rate (refusals/s)", "file rate (records/s, first..last record)"}}
	start := time.Now()
	var loads []auditLoad
	for i := 0; i < rounds; i++ {
		loads = append(loads, auditLoad{"flood (as fast as possible)", n, 0})
	}
	for _, rate := range []float64{1000, 5000} {
		loads = append(loads, auditLoad{fmt.Sprintf("paced %.0f/s for 2 s", rate), int(2 * rate), rate})
	}
	for round, l := range loads {
		log := filepath.Join(e.scratch, fmt.Sprintf("audit-%d.jsonl", round))
		argv := []string{e.oxs, "run", "--workspace", ws, "--audit-log", log, "--", e.self, "worker", "auditgen", "--target", target,
			"--n", strconv.Itoa(l.n), "--rate", strconv.FormatFloat(l.rate, 'f', 0, 64)}
		gen, err := workerJSON(ctx, ws, argv)
		if err != nil {
			return []*report{r}, err
		}
		c, err := countAuditLog(log, "landlock")
		if err != nil {
			return []*report{r}, err
		}
		generated := int(gen["denied"])
		unaccounted := generated - c.denials - int(c.lost)
		fileRate := "n/a"
		if span := c.last.Sub(c.first); span > 0 && c.denials > 1 {
			fileRate = fmt.Sprintf("%.0f", float64(c.denials-1)/span.Seconds())
		}
		r.Rows = append(r.Rows, []string{strconv.Itoa(round + 1), l.name, strconv.Itoa(generated), strconv.Itoa(c.denials),
			strconv.FormatUint(c.lost, 10), strconv.Itoa(unaccounted),
			fmt.Sprintf("%.0f", float64(generated)/(gen["ns"]/1e9)), fileRate})
		fmt.Fprintf(os.Stderr, "oxbench: audit: round %d/%d done\n", round+1, len(loads))
	}
	r.Took = time.Since(start).Round(time.Second).String()
	r.Notes = []string{
		fmt.Sprintf("Each round is one `oxsupervise run` (workspace-write) whose command is a worker that tries to create %s (%d times back to back in the flood rounds, at a fixed rate in the paced ones) (outside every writable root). Every refusal is a Landlock audit record; the session's kernelaudit reader turns it into a JSON line in the session's --audit-log file.", target, n),
		"events_lost comes from the kernel's global audit lost counter and socket drops as the session's reader reports them, so it can include records of other audit users on the machine; unaccounted can then be understated, never overstated.",
		"`unaccounted` = generated − records − events_lost: refusals that vanished without being counted. Non-zero means silent loss (a bug against DESIGN §5); negative means more records than refusals.",
		"The file rate is measured between the first and last denial record's @timestamp (millisecond resolution), i.e. the rate the pipeline sustained while the generator was flooding it.",
	}
	rb, err := bpfAuditReport(ctx, e, loads)
	return []*report{r, rb}, err
}

// auditLoad is one round of an audit benchmark: n refusals, paced at rate
// per second (0: back to back).
type auditLoad struct {
	name string
	n    int
	rate float64
}

// bpfAuditReport floods the BPF path: refusals of the cgroup network
// programs through the ring buffer all programs share (audit/bpfring) and
// the network layer into a JSON-lines file, with flood control out of the
// way so that every refusal is meant to become a record.
func bpfAuditReport(ctx context.Context, e *env, loads []auditLoad) (*report, error) {
	const addr = "192.0.2.1:9" // TEST-NET-1: refused before any packet leaves
	r := &report{ID: "audit-bpf", Title: "Audit: BPF refusals, shared ring buffer -> supervisor -> JSON-lines file",
		Command: e.commandFor("audit"), Rounds: len(loads),
		Headers: []string{"round", "load", "refusals generated", "denial records in file", "events_lost counted", "suppressed", "unaccounted", "generator rate (refusals/s)", "file rate (records/s, first refusal..all written)"}}
	start := time.Now()
	mount, err := cgroup.Cgroup2Mount()
	if err != nil {
		return r, err
	}
	parent := filepath.Join(mount, fmt.Sprintf("oxbench-events-%d", os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		return r, err
	}
	defer os.Remove(parent)
	unlimited := audit.FloodOptions{Rate: math.MaxInt32, Burst: math.MaxInt32}
	layer, err := session.NewNetworkLayer(session.NetworkConfig{Parent: parent, Flood: unlimited})
	if err != nil {
		return r, fmt.Errorf("network layer: %w", err)
	}
	defer layer.Close()
	for round, l := range loads {
		log := filepath.Join(e.scratch, fmt.Sprintf("audit-bpf-%d.jsonl", round))
		child := filepath.Join(parent, fmt.Sprintf("r%d", round))
		if err := os.Mkdir(child, 0o755); err != nil {
			return r, err
		}
		id, err := cgroup.ID(child)
		if err != nil {
			return r, err
		}
		c := &policy.Compiled{Mode: policy.ModeWorkspaceWrite, Audit: policy.Audit{Path: log},
			Network: policy.Network{Policy: policy.NetNone, Loopback: policy.LoopbackNone}}
		td, err := layer.Apply(ctx, session.SessionInfo{ID: fmt.Sprintf("bench-%d", round), CgroupPath: child, CgroupID: id, Policy: c})
		if err != nil {
			return r, err
		}
		began := time.Now()
		gen, genErr := inGroup(ctx, child, []string{e.self, "worker", "auditgen", "--op", "connect", "--addr", addr,
			"--n", strconv.Itoa(l.n), "--rate", strconv.FormatFloat(l.rate, 'f', 0, 64)})
		tdErr := td(ctx)
		written := time.Since(began)
		os.Remove(child)
		if err := errors.Join(genErr, tdErr); err != nil {
			return r, err
		}
		counts, err := countAuditLog(log, "cgroup")
		if err != nil {
			return r, err
		}
		generated := int(gen["denied"])
		unaccounted := generated - counts.denials - int(counts.lost) - int(counts.suppressed)
		r.Rows = append(r.Rows, []string{strconv.Itoa(round + 1), l.name, strconv.Itoa(generated), strconv.Itoa(counts.denials),
			strconv.FormatUint(counts.lost, 10), strconv.FormatUint(counts.suppressed, 10), strconv.Itoa(unaccounted),
			fmt.Sprintf("%.0f", float64(generated)/(gen["ns"]/1e9)), fmt.Sprintf("%.0f", float64(counts.denials)/written.Seconds())})
		fmt.Fprintf(os.Stderr, "oxbench: audit-bpf: round %d/%d done\n", round+1, len(loads))
	}
	r.Took = time.Since(start).Round(time.Second).String()
	r.Notes = []string{
		fmt.Sprintf("Each round is one session (network none, a cgroup below a parent this run owns) of session.NewNetworkLayer, with the default %d MiB ring buffer and flood control set out of reach; its command is a worker started inside the group that makes refused TCP connects to %s (back to back in the flood rounds, at a fixed rate in the paced ones). Every refusal is a record of the cgroup connect4 program in the ring buffer the filesystem and network programs share; the layer turns it into a JSON line in the session's audit file.", loader.DefaultRingSize>>20, addr),
		"`unaccounted` = generated − records − events_lost − suppressed: refusals that vanished without being counted. Non-zero means silent loss (a bug against DESIGN §5).",
		"The file rate is the records written divided by the time from the worker's start until the session's teardown returned, which drains the ring buffer and settles the kernel's counts: the rate the whole path sustained, kernel to file.",
		"The Landlock table above is the same measurement through the kernel audit path, in the same run.",
	}
	return r, nil
}

// memorySuite measures the standalone supervisor's RSS while a session
// runs, and the BPF map memory the egress programs use per session.
func memorySuite(ctx context.Context, e *env) ([]*report, error) {
	ws := filepath.Join(e.scratch, "mem-ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, err
	}
	daemonSessions := e.n(100, 20)
	r := &report{ID: "memory", Title: fmt.Sprintf("Memory: daemon RSS idle and with %d sessions, supervisor RSS per session, BPF map memory per session", daemonSessions),
		Command: e.commandFor("memory"), Rounds: 1, Headers: []string{"what", "value", "how"}}
	start := time.Now()
	load := watchLoad(5 * time.Second)
	defer func() { r.Notes = append(r.Notes, load.note()) }()
	rows, err := e.daemonMemory(ctx, daemonSessions)
	r.Rows = append(r.Rows, rows...)
	if err != nil {
		return []*report{r}, fmt.Errorf("daemon memory: %w", err)
	}
	for _, mode := range []string{"full-access", "workspace-write"} {
		argv := []string{e.oxs, "run", "-s", mode, "--workspace", ws, "--audit-log", filepath.Join(e.scratch, "mem-audit.jsonl"), "--", "sleep", "2"}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = ws
		if err := cmd.Start(); err != nil {
			return []*report{r}, err
		}
		time.Sleep(1200 * time.Millisecond)
		rss, hwm, err := procRSS(cmd.Process.Pid)
		waitErr := cmd.Wait()
		if err != nil {
			return []*report{r}, fmt.Errorf("read supervisor RSS: %w", err)
		}
		if waitErr != nil {
			return []*report{r}, fmt.Errorf("%s: %w", strings.Join(argv, " "), waitErr)
		}
		r.Rows = append(r.Rows, []string{"standalone supervisor RSS, " + mode + " session running `sleep 2`",
			fmt.Sprintf("%.1f MiB (peak %.1f MiB)", rss, hwm), "VmRSS/VmHWM of the `oxsupervise run` process 1.2 s into the session"})
	}

	f, err := newNetFixture(egress.Config{Resolver: egress.ResolverConfig{Upstream: []string{"127.0.0.1:9"}}})
	if err != nil {
		return []*report{r}, fmt.Errorf("attach egress programs: %w", err)
	}
	defer f.Close()
	mem0, maps, err := bpfMapMemory()
	if err != nil {
		return []*report{r}, err
	}
	rss0, _, _ := procRSS(os.Getpid())
	var mem1 uint64
	const sessions = 100
	for i := 0; i < sessions; i++ {
		n := policy.Network{Policy: policy.NetAllowlist, Loopback: policy.LoopbackSession, Allow: []policy.NetRule{
			{Prefix: netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", i)), Ports: []policy.PortRange{{First: 443, Last: 443}}},
			{Prefix: netip.MustParsePrefix(fmt.Sprintf("192.0.2.%d/32", i))},
			{Host: "github.com"},
		}}
		if _, err := f.group(fmt.Sprintf("s%03d", i), &n); err != nil {
			return []*report{r}, fmt.Errorf("session %d: %w", i, err)
		}
		if i == 0 {
			if mem1, _, err = bpfMapMemory(); err != nil {
				return []*report{r}, err
			}
		}
	}
	mem100, _, err := bpfMapMemory()
	if err != nil {
		return []*report{r}, err
	}
	rss100, _, _ := procRSS(os.Getpid())
	r.Rows = append(r.Rows,
		[]string{"BPF map memory of the egress programs, no session", fmt.Sprintf("%.1f KiB in %d maps", float64(mem0)/1024, maps), "sum of `memlock` in /proc/self/fdinfo of the maps egress.Attach uses, each counted once; includes the 4 MiB ring buffer all BPF programs share (loader.NewEventMaps)"},
		[]string{"BPF map memory, 1 allowlist session (2 IP rules + 1 hostname)", fmt.Sprintf("%.1f KiB", float64(mem1)/1024), "same"},
		[]string{fmt.Sprintf("BPF map memory, %d allowlist sessions (2 IP rules + 1 hostname each)", sessions), fmt.Sprintf("%.1f KiB", float64(mem100)/1024), "same"},
		[]string{"BPF map memory per session", fmt.Sprintf("%.0f bytes", float64(mem100-mem0)/sessions), "difference / 100 (hash maps are preallocated, so only the allow trie grows)"},
		[]string{"supervisor heap/RSS per network session (resolver listeners, state)", fmt.Sprintf("%.1f KiB", (rss100-rss0)*1024/sessions), "RSS of the benchmark process before and after adding 100 sessions, / 100"},
	)
	r.Took = time.Since(start).Round(time.Second).String()
	r.Notes = []string{
		fmt.Sprintf("The daemon rows come from an `oxsupervise daemon` the harness starts on a temporary socket with its own --cgroup-parent, --run-dir and --audit-log (it does not touch a system daemon's sessions). Its %d sessions are real: each client runs **as an unprivileged user** (nobody, and the user daemon for the sessions beyond the daemon's per-uid connection limit; setuid in the harness), so `oxsupervise run` goes through the daemon; the workspace is a root-owned directory nobody cannot write. Nothing is subtracted.", daemonSessions),
		"BPF-LSM (fsguard) map memory is measured in the kernel-test VM (figure fs-vm-mapmem): its programs do not load on the host (EPERM).",
	}
	return []*report{r}, nil
}

// procRSS returns VmRSS and VmHWM in MiB.
func procRSS(pid int) (rss, hwm float64, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(raw), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm, nil
}

// bpfMapMemory sums the memlock of every BPF map this process holds.
func bpfMapMemory() (bytes uint64, maps int, err error) {
	ents, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		return 0, 0, err
	}
	// A map held through two descriptors (a collection's clone of a
	// shared map) is counted once.
	seen := map[string]bool{}
	for _, ent := range ents {
		raw, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", ent.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		s := string(raw)
		if !strings.Contains(s, "map_type:") {
			continue
		}
		var id string
		var memlock uint64
		for _, l := range strings.Split(s, "\n") {
			if v, ok := strings.CutPrefix(l, "map_id:"); ok {
				id = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "memlock:"); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, 0, fmt.Errorf("fdinfo %s: %w", ent.Name(), err)
				}
				memlock = n
			}
		}
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		bytes += memlock
		maps++
	}
	if maps == 0 {
		return 0, 0, fmt.Errorf("no BPF map fds found in /proc/self/fdinfo")
	}
	return bytes, maps, nil
}
