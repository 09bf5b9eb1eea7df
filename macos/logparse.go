package macos

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/openoxide/oxsupervise/audit"
)

// LogPredicate selects the kernel's Seatbelt violation messages for
// `log stream --style ndjson --predicate`: they are logged by the kernel
// (processID 0) from the Sandbox kext.
const LogPredicate = `(processID == 0) AND (senderImagePath CONTAINS "/Sandbox") AND (eventMessage BEGINSWITH "Sandbox: ")`

// LogStreamArgs are the arguments (without the program name) of the
// `log` invocation whose stdout ParseLogLine reads.
func LogStreamArgs() []string {
	return []string{"stream", "--style", "ndjson", "--level", "default", "--predicate", LogPredicate}
}

// Denial is one Seatbelt violation as the unified log reports it.
type Denial struct {
	Time time.Time
	// Process and PID are the denied process as the kernel named it.
	Process string
	PID     int
	// Count is the N of deny(N): how many identical denials this line
	// stands for (the kernel coalesces repeats).
	Count int
	// Operation is the Seatbelt operation (file-read-data, file-write-create,
	// network-outbound, ...).
	Operation string
	// Target is the operation's object: a path, an address, a service name.
	Target string
	// Session and Rule come from the rule's (with message ...) tag when the
	// log line carries it.
	Session string
	Rule    string
}

// logEntry is the subset of a `log stream --style ndjson` object we read.
type logEntry struct {
	Timestamp       string `json:"timestamp"`
	EventMessage    string `json:"eventMessage"`
	EventType       string `json:"eventType"`
	ProcessID       int    `json:"processID"`
	SenderImagePath string `json:"senderImagePath"`
}

// sandboxMessage is "Sandbox: NAME(PID) deny(N) OPERATION [TARGET]". NAME may
// itself contain spaces and parentheses, so the pid is the last "(digits)"
// before " deny(".
var sandboxMessage = regexp.MustCompile(`^Sandbox: (.*)\((\d+)\) deny\((\d+)\) (\S+)(?: (.*))?$`)

// messageTag is the text this package's rules attach with (with message).
var messageTag = regexp.MustCompile(`\s*oxs session=([A-Za-z0-9._-]+) rule=([A-Za-z0-9-]+)\s*$`)

// logTimeLayout is the timestamp format of `log stream --style ndjson`.
const logTimeLayout = "2006-01-02 15:04:05.000000-0700"

// ParseLogLine parses one line of `log stream --style ndjson`. ok is false
// for lines that are not Seatbelt denials (the "Filtering the log data..."
// banner, other events, allow reports); err is set only for lines that look
// like JSON but cannot be decoded, so a format change is noticed rather than
// silently dropping every denial.
func ParseLogLine(line []byte) (d Denial, ok bool, err error) {
	trimmed := strings.TrimSpace(string(line))
	if !strings.HasPrefix(trimmed, "{") {
		return Denial{}, false, nil
	}
	var e logEntry
	if err := json.Unmarshal([]byte(trimmed), &e); err != nil {
		return Denial{}, false, fmt.Errorf("decode log stream line: %w", err)
	}
	m := sandboxMessage.FindStringSubmatch(e.EventMessage)
	if m == nil {
		return Denial{}, false, nil
	}
	d.Process = m[1]
	d.PID, _ = strconv.Atoi(m[2])
	d.Count, _ = strconv.Atoi(m[3])
	d.Operation = m[4]
	d.Target = m[5]
	if tag := messageTag.FindStringSubmatchIndex(d.Target); tag != nil {
		d.Session = d.Target[tag[2]:tag[3]]
		d.Rule = d.Target[tag[4]:tag[5]]
		d.Target = d.Target[:tag[0]]
	}
	if e.Timestamp != "" {
		t, err := time.Parse(logTimeLayout, e.Timestamp)
		if err != nil {
			return Denial{}, false, fmt.Errorf("decode log stream timestamp %q: %w", e.Timestamp, err)
		}
		d.Time = t
	}
	return d, true, nil
}

// Record converts a denial into the common audit schema (layer seatbelt).
// rules is Profile.Rules, used to describe the rule that decided.
func (d Denial) Record(session string, mode string, rules map[string]string) *audit.Record {
	r := &audit.Record{
		Timestamp: d.Time,
		Process:   &audit.Process{PID: d.PID, Name: d.Process},
		Ox: audit.Ox{
			Kind:     audit.KindDenial,
			Session:  session,
			Layer:    audit.LayerSeatbelt,
			Decision: "deny",
			// Seatbelt denials surface as EPERM for file and network
			// operations.
			Errno: 1,
			Mode:  mode,
			Rule:  d.Rule,
		},
	}
	if desc, ok := rules[d.Rule]; ok && d.Rule != "" {
		r.Ox.Rule = d.Rule + ": " + desc
	}
	r.Event.Action = seatbeltAction(d.Operation)
	r.Event.Reason = "seatbelt " + d.Operation
	if d.Count > 1 {
		r.Message = fmt.Sprintf("%d identical denials coalesced by the kernel", d.Count)
	}
	switch {
	case strings.HasPrefix(d.Operation, "file-"):
		r.Ox.Class = audit.ClassFile
		r.File = &audit.File{Path: d.Target}
	case strings.HasPrefix(d.Operation, "network-"):
		r.Ox.Class = audit.ClassNetwork
		if ap, err := parseEndpoint(d.Target); err == nil {
			r.Destination = &audit.Destination{IP: ap.Addr(), Port: ap.Port()}
		} else if strings.HasPrefix(d.Target, "/") {
			r.File = &audit.File{Path: d.Target}
		}
	default:
		r.Ox.Class = audit.ClassSelfProtection
	}
	return r
}

// parseEndpoint reads the address forms Seatbelt logs for network
// operations: "1.2.3.4:443", "[::1]:53", "*:443" and "localhost:53" (the
// last two have no IP and fail).
func parseEndpoint(s string) (netip.AddrPort, error) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[:i]
	}
	return netip.ParseAddrPort(s)
}

// seatbeltAction maps Seatbelt operations onto the operation names the
// Linux layers use, so `audit tail --op` works across platforms.
func seatbeltAction(op string) string {
	switch {
	case strings.HasPrefix(op, "file-read"):
		return "open"
	case op == "file-write-unlink":
		return "unlink"
	case op == "file-write-create":
		return "create"
	case op == "file-write-mode":
		return "chmod"
	case op == "file-write-owner":
		return "chown"
	case op == "file-write-xattr":
		return "setxattr"
	case op == "file-write-times":
		return "setattr"
	case strings.HasPrefix(op, "file-write"):
		return "open"
	case op == "network-outbound":
		return "connect"
	case op == "network-bind":
		return "bind"
	case op == "network-inbound":
		return "accept"
	case op == "signal":
		return "kill"
	}
	return op
}

// ProcessTable returns each live pid's parent pid.
type ProcessTable func() (map[int]int, error)

// Tree tracks which pids belong to a session: the root and every
// descendant. A denial from a pid outside the tree belongs to another
// sandboxed program and is dropped.
type Tree struct {
	root    int
	members map[int]bool
	table   ProcessTable
}

// NewTree starts tracking the process tree below root.
func NewTree(root int, table ProcessTable) *Tree {
	return &Tree{root: root, members: map[int]bool{root: true}, table: table}
}

// Contains reports whether pid is the root or a descendant. Unknown pids
// trigger one fresh look at the process table; a pid that has already
// exited cannot be placed, and Contains returns false for it (callers also
// accept denials whose message tag names the session).
func (t *Tree) Contains(pid int) (bool, error) {
	if t.members[pid] {
		return true, nil
	}
	parents, err := t.table()
	if err != nil {
		return false, fmt.Errorf("read process table: %w", err)
	}
	// Walk up from pid; stop at a known member, at pid 0/1, or on a cycle.
	var chain []int
	seen := map[int]bool{}
	for p := pid; p > 1 && !seen[p]; {
		seen[p] = true
		if t.members[p] {
			for _, c := range chain {
				t.members[c] = true
			}
			return true, nil
		}
		chain = append(chain, p)
		next, ok := parents[p]
		if !ok {
			break
		}
		p = next
	}
	return false, nil
}

// Belongs decides whether a denial is the session's: its rule tag names
// the session, or its pid is in the session's process tree.
func (t *Tree) Belongs(d Denial, session string) (bool, error) {
	if d.Session != "" {
		return d.Session == session, nil
	}
	return t.Contains(d.PID)
}
