package agenthook

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/openoxide/oxsupervise/audit"
)

// RefusalHint ends a refusal summary: the model should stop and ask, not
// retry the same thing another way.
const RefusalHint = "oxsupervise: these are the sandbox's refusals, not transient errors: do not retry them another way; ask the user to change the oxsupervise policy if the task needs them"

// landlockRights names the Landlock access rights that appear in a
// Landlock denial's oxsupervise.rule (the kernel's blockers,
// Documentation/admin-guide/LSM/landlock.rst "Audit").
var landlockRights = map[string]string{
	"fs.execute":      "executing",
	"fs.write_file":   "writing",
	"fs.read_file":    "reading",
	"fs.read_dir":     "listing",
	"fs.remove_dir":   "removing a directory",
	"fs.remove_file":  "removing a file",
	"fs.make_char":    "creating a device",
	"fs.make_dir":     "creating a directory",
	"fs.make_reg":     "creating a file",
	"fs.make_sock":    "creating a socket",
	"fs.make_fifo":    "creating a FIFO",
	"fs.make_block":   "creating a device",
	"fs.make_sym":     "creating a symlink",
	"fs.refer":        "linking or renaming across directories",
	"fs.truncate":     "truncating",
	"fs.ioctl_dev":    "a device ioctl",
	"net.bind_tcp":    "binding a TCP port",
	"net.connect_tcp": "connecting over TCP",
}

// FormatRefusal renders one audit record of a nested session as one line
// the model can act on: what was refused (operation and path or host),
// the errno the command saw, and the rule that decided, so that an agent
// meeting EACCES learns it met the sandbox and which rule. ok is false
// for records that are not refusals (session start/stop, approvals).
func FormatRefusal(r *audit.Record) (line string, ok bool) { return formatRefusal(r, true) }

// formatRefusal leaves the pid out when a summary folds repeats together.
func formatRefusal(r *audit.Record, withPID bool) (string, bool) {
	switch r.Ox.Kind {
	case audit.KindSuppressed:
		return fmt.Sprintf("oxsupervise: %d more refusals were not listed one by one (flood control)", r.Ox.Suppressed), true
	case audit.KindEventsLost:
		return fmt.Sprintf("oxsupervise: %d refusals were lost before they could be logged", r.Ox.EventsLost), true
	case audit.KindDenial:
	default:
		return "", false
	}
	var b strings.Builder
	b.WriteString("oxsupervise: refused ")
	op := r.Event.Action
	if op == "" {
		op = "an operation"
	}
	switch r.Ox.Class {
	case audit.ClassDNS:
		name := "a name"
		if r.DNS != nil {
			name = r.DNS.Question.Name
		}
		fmt.Fprintf(&b, "DNS lookup of %s", name)
	case audit.ClassNetwork:
		fmt.Fprintf(&b, "%s to %s", op, destination(r))
	default:
		b.WriteString(op)
		if r.File != nil && r.File.Path != "" {
			fmt.Fprintf(&b, " of %s", r.File.Path)
		} else if r.File != nil {
			fmt.Fprintf(&b, " of the file at device %s inode %d", r.File.Device, r.File.Inode)
		}
	}
	if r.Process != nil && r.Process.Name != "" {
		fmt.Fprintf(&b, " by %s", r.Process.Name)
		if withPID && r.Process.PID != 0 {
			fmt.Fprintf(&b, " (pid %d)", r.Process.PID)
		}
	}
	if r.Error != nil && r.Error.Code != "" {
		fmt.Fprintf(&b, ": %s", r.Error.Code)
	} else if r.Ox.Errno != 0 {
		fmt.Fprintf(&b, ": %s", audit.ErrnoName(r.Ox.Errno))
	} else if r.DNS != nil && r.DNS.ResponseCode != "" {
		fmt.Fprintf(&b, ": %s", r.DNS.ResponseCode)
	}
	if why := ruleText(r); why != "" {
		fmt.Fprintf(&b, "; rule: %s", why)
	}
	if r.Ox.Layer != "" {
		fmt.Fprintf(&b, " [%s", r.Ox.Layer)
		if r.Ox.Session != "" {
			fmt.Fprintf(&b, ", session %s", r.Ox.Session)
		}
		b.WriteByte(']')
	}
	return b.String(), true
}

func destination(r *audit.Record) string {
	if r.Destination == nil {
		return "a peer"
	}
	d := r.Destination.IP.String()
	if r.Destination.Port != 0 {
		d = netip.AddrPortFrom(r.Destination.IP, r.Destination.Port).String()
	}
	if r.Network != nil && r.Network.Transport != "" {
		d = r.Network.Transport + " " + d
	}
	if r.Destination.Domain != "" {
		d += " (" + r.Destination.Domain + ")"
	}
	return d
}

// ruleText is the record's rule in words: Landlock's raw blockers are
// named ("fs.write_file" -> writing outside the session's writable
// paths), other layers' rules are already sentences.
func ruleText(r *audit.Record) string {
	if r.Ox.Rule == "" {
		return ""
	}
	if r.Ox.Layer != audit.LayerLandlock {
		return r.Ox.Rule
	}
	var words []string
	for _, b := range strings.Split(r.Ox.Rule, ",") {
		b = strings.TrimSpace(b)
		if w, ok := landlockRights[b]; ok {
			words = append(words, w)
		} else {
			words = append(words, b)
		}
	}
	return strings.Join(words, ", ") + " is not allowed here (" + r.Ox.Rule + ")"
}

// RefusalSummary renders a nested session's refusals, one line each in
// the order they happened, identical ones once with a count, then the
// hint; nil when there was none. session, when not empty, keeps only that
// session's records (the audit stream may interleave sessions).
func RefusalSummary(records []audit.Record, session string) []string {
	var lines []string
	count := map[string]int{}
	for i := range records {
		r := &records[i]
		if session != "" && r.Ox.Session != session {
			continue
		}
		// Without the pid, so that one refusal repeated by several
		// processes is one line with a count.
		line, ok := formatRefusal(r, false)
		if !ok {
			continue
		}
		if r.Ox.Kind == audit.KindDenial {
			if count[line]++; count[line] > 1 {
				continue
			}
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return nil
	}
	for i, l := range lines {
		if n := count[l]; n > 1 {
			lines[i] = l + " (" + strconv.Itoa(n) + " times)"
		}
	}
	return append(lines, RefusalHint)
}
