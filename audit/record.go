package audit

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// SchemaVersion is written into every record as schema_version. Bump it when
// a field changes meaning or type; adding optional fields does not bump it.
const SchemaVersion = 1

// Kind is what an event is about (oxsupervise.kind).
type Kind string

const (
	KindDenial       Kind = "denial"
	KindEventsLost   Kind = "events_lost"
	KindSuppressed   Kind = "suppressed"
	KindSessionStart Kind = "session_start"
	KindSessionStop  Kind = "session_stop"
	KindApproval     Kind = "approval"
	KindPolicyChange Kind = "policy_change"
)

// Layer is the enforcement layer or component that produced the event
// (oxsupervise.layer).
type Layer string

// The values are the ones docs/audit-schema.md and DESIGN §5 document; a
// constant's name says which layer, its value is what records carry.
const (
	LayerBPFLSM Layer = "bpf-lsm"
	// LayerCgroupNet is the network layer: the connect/sendmsg BPF programs
	// attached to the session's cgroup. (session.LayerCgroup is the cgroup
	// itself.)
	LayerCgroupNet Layer = "cgroup"
	LayerLandlock  Layer = "landlock"
	LayerSeccomp   Layer = "seccomp"
	// LayerQuarantine moved a protected entry the session created out of
	// its writable roots (the Landlock path, package quarantine).
	LayerQuarantine Layer = "quarantine"
	// LayerReadOnlyView is the Landlock path's read-only mount view
	// outside the writable roots: the VFS refused with EROFS before any
	// LSM was asked, and a tracer of the session's system calls reported
	// it (bpf/roview.c).
	LayerReadOnlyView Layer = "read-only-view"
	LayerResolver     Layer = "resolver"
	LayerSeatbelt     Layer = "seatbelt"
	LayerJob          Layer = "job"
	LayerSupervisor   Layer = "supervisor"
)

// Class narrows a denial down to what was protected (oxsupervise.class).
type Class string

const (
	ClassFile           Class = "file"
	ClassNetwork        Class = "network"
	ClassDNS            Class = "dns"
	ClassSelfProtection Class = "self-protection"
)

// Record is one audit event. Nested structs mirror the nested JSON objects
// written to the log; pointer members are omitted when nil.
type Record struct {
	Timestamp     time.Time    `json:"@timestamp"`
	SchemaVersion int          `json:"schema_version"`
	Message       string       `json:"message,omitempty"`
	Event         Event        `json:"event"`
	Process       *Process     `json:"process,omitempty"`
	User          *User        `json:"user,omitempty"`
	File          *File        `json:"file,omitempty"`
	Destination   *Destination `json:"destination,omitempty"`
	Network       *Network     `json:"network,omitempty"`
	DNS           *DNS         `json:"dns,omitempty"`
	Error         *Error       `json:"error,omitempty"`
	Ox            Ox           `json:"oxsupervise"`
}

// Event holds the ECS event.* categorisation. Normalize fills Kind,
// Category, Type and Outcome from Ox.Kind and Ox.Class; Action is the
// operation for denials (open, unlink, connect, dns, ptrace, ...) and the
// kind's name otherwise.
type Event struct {
	Kind     string   `json:"kind"`
	Category []string `json:"category"`
	Type     []string `json:"type"`
	Action   string   `json:"action"`
	Outcome  string   `json:"outcome"`
	Reason   string   `json:"reason,omitempty"`
}

// Process is the acting process (ECS process.*).
type Process struct {
	PID         int     `json:"pid,omitempty"`
	Name        string  `json:"name,omitempty"`
	Executable  string  `json:"executable,omitempty"`
	CommandLine string  `json:"command_line,omitempty"`
	Thread      *Thread `json:"thread,omitempty"`
	Parent      *Parent `json:"parent,omitempty"`
}

// Thread is ECS process.thread.
type Thread struct {
	ID int `json:"id"`
}

// Parent is ECS process.parent: the pid from the producer or /proc, name
// and executable from /proc (enrichment).
type Parent struct {
	PID        int    `json:"pid"`
	Name       string `json:"name,omitempty"`
	Executable string `json:"executable,omitempty"`
}

// MaxAncestry bounds oxsupervise.ancestry.
const MaxAncestry = 8

// Ancestor is one process of oxsupervise.ancestry.
type Ancestor struct {
	PID  int    `json:"pid"`
	Name string `json:"name,omitempty"`
}

// User is ECS user.*; ECS types user.id as a keyword, so the uid is a
// decimal string.
type User struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// File is the object of a file denial. Device is a keyword in ECS: the BPF
// side writes "major:minor", Landlock writes the superblock id ("vda2").
type File struct {
	Path   string `json:"path,omitempty"`
	Device string `json:"device,omitempty"`
	Inode  uint64 `json:"inode,omitempty,string"`
}

// Destination is the peer of a network denial; Domain is the hostname the
// policy matched on, when known.
type Destination struct {
	IP     netip.Addr `json:"ip"`
	Port   uint16     `json:"port,omitempty"`
	Domain string     `json:"domain,omitempty"`
}

// Network is ECS network.*: transport (tcp, udp, ...) and type (ipv4, ipv6).
type Network struct {
	Transport string `json:"transport,omitempty"`
	Type      string `json:"type,omitempty"`
}

// DNS is ECS dns.* for resolver refusals.
type DNS struct {
	Question     DNSQuestion `json:"question"`
	ResponseCode string      `json:"response_code,omitempty"`
}

// DNSQuestion is ECS dns.question.
type DNSQuestion struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
}

// Error carries the errno the caller saw: Code is its symbolic name
// (EACCES), as ECS error.code is a keyword.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// Ox holds the oxsupervise.* fields that ECS has no name for.
type Ox struct {
	Kind    Kind   `json:"kind"`
	Session string `json:"session,omitempty"`
	// ParentSession is the session a nested session runs inside (its
	// records only): the child's commands were the parent's to run.
	ParentSession string `json:"parent_session,omitempty"`
	Layer         Layer  `json:"layer,omitempty"`
	Class         Class  `json:"class,omitempty"`
	// Decision is deny | allow | ask, as the policy decided.
	Decision string `json:"decision,omitempty"`
	// Errno is the numeric errno (Linux numbering) alongside error.code.
	Errno int `json:"errno,omitempty"`
	// Rule names what decided: an anchor, an allow entry, the raw Landlock
	// blockers, a managed-policy key.
	Rule string `json:"rule,omitempty"`
	// Mode is the session's sandbox mode.
	Mode string `json:"mode,omitempty"`
	// Suppressed counts denials that flood control did not log individually
	// since the previous summary for this session (kind suppressed).
	Suppressed uint64 `json:"suppressed,omitempty"`
	// EventsLost counts events the kernel could not hand over (ring buffer
	// reservation failures) since the previous events_lost record.
	EventsLost uint64 `json:"events_lost,omitempty"`
	// PolicyDigest is policy.Compiled.Digest() of the session's policy
	// (session_start, session_stop, policy_change: the new one).
	PolicyDigest string `json:"policy_digest,omitempty"`
	// PreviousPolicyDigest is the digest replaced by a policy_change.
	PreviousPolicyDigest string    `json:"previous_policy_digest,omitempty"`
	Approval             *Approval `json:"approval,omitempty"`
	// LandlockDomain is the kernel's Landlock domain id of a Landlock denial.
	LandlockDomain string `json:"landlock_domain,omitempty"`
	// Ancestry is the acting process's parent, its parent and so on (at
	// most MaxAncestry, up to but not including pid 1), read from /proc
	// when the record was written: which shell, agent or supervisor the
	// refused command ran under.
	Ancestry []Ancestor `json:"ancestry,omitempty"`
	// Enriched lists the fields filled from /proc by the sink rather than
	// given by the producer; they can be wrong if the pid was reused.
	Enriched []string `json:"enriched,omitempty"`
}

// Approval describes an approval request or its answer.
type Approval struct {
	ID string `json:"id"`
	// Decision is pending | once | always | reject.
	Decision string `json:"decision"`
	// Command is the command line the approval is about.
	Command string `json:"command,omitempty"`
}

var kindECS = map[Kind]struct {
	kind, category, typ, outcome string
}{
	KindDenial:       {"event", "", "denied", "failure"},
	KindEventsLost:   {"pipeline_error", "host", "info", "unknown"},
	KindSuppressed:   {"metric", "", "denied", "failure"},
	KindSessionStart: {"event", "session", "start", "success"},
	KindSessionStop:  {"event", "session", "end", "success"},
	KindApproval:     {"event", "process", "info", "unknown"},
	KindPolicyChange: {"event", "configuration", "change", "success"},
}

var classCategory = map[Class]string{
	ClassFile:           "file",
	ClassNetwork:        "network",
	ClassDNS:            "network",
	ClassSelfProtection: "process",
}

var validLayers = map[Layer]bool{
	LayerBPFLSM: true, LayerCgroupNet: true, LayerLandlock: true, LayerSeccomp: true, LayerQuarantine: true, LayerReadOnlyView: true, LayerResolver: true,
	LayerSeatbelt: true, LayerJob: true, LayerSupervisor: true,
}

// Normalize fills the fields derived from what the producer set: the
// schema version, a UTC timestamp, the ECS event.* categorisation and
// error.code from Ox.Errno. Fields the producer set are kept.
func (r *Record) Normalize() {
	r.SchemaVersion = SchemaVersion
	if r.Timestamp.IsZero() {
		r.Timestamp = time.Now()
	}
	// Round(0) drops the monotonic reading so a record equals its decoded form.
	r.Timestamp = r.Timestamp.UTC().Round(0)
	ecs, ok := kindECS[r.Ox.Kind]
	if !ok {
		return
	}
	if r.Event.Kind == "" {
		r.Event.Kind = ecs.kind
	}
	if len(r.Event.Category) == 0 {
		category := ecs.category
		if category == "" {
			category = classCategory[r.Ox.Class]
		}
		if category != "" {
			r.Event.Category = []string{category}
		}
	}
	if len(r.Event.Type) == 0 {
		r.Event.Type = []string{ecs.typ}
	}
	if r.Event.Outcome == "" {
		r.Event.Outcome = ecs.outcome
		if r.Ox.Kind == KindApproval && r.Ox.Approval != nil {
			switch r.Ox.Approval.Decision {
			case "once", "always":
				r.Event.Outcome = "success"
			case "reject":
				r.Event.Outcome = "failure"
			}
		}
	}
	if r.Event.Action == "" && r.Ox.Kind != KindDenial {
		r.Event.Action = string(r.Ox.Kind)
	}
	if r.Ox.Kind == KindDenial && r.Ox.Decision == "" {
		r.Ox.Decision = "deny"
	}
	if r.Error == nil && r.Ox.Errno != 0 {
		r.Error = &Error{Code: ErrnoName(r.Ox.Errno)}
	}
}

// Validate reports the first field that makes r unfit for the log.
func (r *Record) Validate() error {
	if _, ok := kindECS[r.Ox.Kind]; !ok {
		return fmt.Errorf("oxsupervise.kind %q is not a known event kind", r.Ox.Kind)
	}
	if r.Ox.Layer != "" && !validLayers[r.Ox.Layer] {
		return fmt.Errorf("oxsupervise.layer %q is not a known layer", r.Ox.Layer)
	}
	switch r.Ox.Kind {
	case KindDenial:
		if r.Ox.Layer == "" {
			return errors.New("denial without oxsupervise.layer")
		}
		if r.Event.Action == "" {
			return errors.New("denial without event.action (the denied operation)")
		}
		if _, ok := classCategory[r.Ox.Class]; !ok {
			return fmt.Errorf("denial with oxsupervise.class %q (want file, network, dns or self-protection)", r.Ox.Class)
		}
	case KindEventsLost:
		if r.Ox.EventsLost == 0 {
			return errors.New("events_lost record with a zero count")
		}
	case KindSuppressed:
		if r.Ox.Suppressed == 0 {
			return errors.New("suppressed record with a zero count")
		}
	case KindSessionStart, KindSessionStop, KindPolicyChange:
		if r.Ox.Session == "" {
			return fmt.Errorf("%s without oxsupervise.session", r.Ox.Kind)
		}
	case KindApproval:
		if r.Ox.Approval == nil || r.Ox.Approval.ID == "" {
			return errors.New("approval record without oxsupervise.approval.id")
		}
	}
	return nil
}

// linuxErrnoNames covers the errnos enforcement layers return, in Linux
// numbering (the kernel's, whatever OS reads the log).
var linuxErrnoNames = map[int]string{
	1: "EPERM", 2: "ENOENT", 13: "EACCES", 18: "EXDEV", 22: "EINVAL", 30: "EROFS",
	95: "EOPNOTSUPP", 97: "EAFNOSUPPORT", 101: "ENETUNREACH", 111: "ECONNREFUSED",
	113: "EHOSTUNREACH",
}

// ErrnoName returns the symbolic name of a Linux errno, or "errno N".
func ErrnoName(errno int) string {
	if name, ok := linuxErrnoNames[errno]; ok {
		return name
	}
	return "errno " + strconv.Itoa(errno)
}
