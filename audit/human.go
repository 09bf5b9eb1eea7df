package audit

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// HumanOptions tune FormatHuman.
type HumanOptions struct {
	// Colour adds ANSI colours (denials red, loss yellow); only for TTYs.
	Colour bool
	// Location for timestamps; nil means UTC.
	Location *time.Location
}

const (
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiGreen  = "\x1b[32m"
	ansiReset  = "\x1b[0m"
)

// FormatHuman renders r as one aligned line without a trailing newline:
// time, session, layer, kind, action, pid, process name, then what the
// event was about and the rule that decided.
func FormatHuman(r *Record, opts HumanOptions) string {
	loc := opts.Location
	if loc == nil {
		loc = time.UTC
	}
	pid, name := "-", "-"
	if r.Process != nil {
		if r.Process.PID != 0 {
			pid = strconv.Itoa(r.Process.PID)
		}
		switch {
		case r.Process.Name != "":
			name = r.Process.Name
		case r.Process.Executable != "":
			name = r.Process.Executable[strings.LastIndexByte(r.Process.Executable, '/')+1:]
		}
	}
	kind := string(r.Ox.Kind)
	action := r.Event.Action
	if action == kind {
		action = "" // non-denials carry their kind as action: say it once
	}
	line := fmt.Sprintf("%-24s %-12s %-10s %-13s %-9s %7s %-15s %s",
		r.Timestamp.In(loc).Format("2006-01-02T15:04:05.000Z07:00"),
		orDash(r.Ox.Session), orDash(string(r.Ox.Layer)), kind, orDash(action),
		pid, truncate(name, 15), subject(r))
	if !opts.Colour {
		return line
	}
	switch r.Ox.Kind {
	case KindDenial, KindSuppressed:
		return ansiRed + line + ansiReset
	case KindEventsLost:
		return ansiYellow + line + ansiReset
	case KindSessionStart, KindSessionStop:
		return ansiGreen + line + ansiReset
	}
	return line
}

// subject says what the event was about, then the errno and rule.
func subject(r *Record) string {
	var parts []string
	switch {
	case r.File != nil && r.File.Path != "":
		parts = append(parts, r.File.Path)
	case r.File != nil:
		parts = append(parts, fmt.Sprintf("dev=%s ino=%d", r.File.Device, r.File.Inode))
	case r.DNS != nil:
		parts = append(parts, r.DNS.Question.Name)
	case r.Destination != nil:
		addr := r.Destination.IP.String()
		if r.Destination.Port != 0 {
			addr = netip.AddrPortFrom(r.Destination.IP, r.Destination.Port).String()
		}
		if r.Network != nil && r.Network.Transport != "" {
			addr = r.Network.Transport + "://" + addr
		}
		if r.Destination.Domain != "" {
			addr += " (" + r.Destination.Domain + ")"
		}
		parts = append(parts, addr)
	}
	if r.Error != nil {
		parts = append(parts, r.Error.Code)
	}
	if r.Ox.Suppressed != 0 {
		parts = append(parts, "suppressed="+strconv.FormatUint(r.Ox.Suppressed, 10))
	}
	if r.Ox.EventsLost != 0 {
		parts = append(parts, "events_lost="+strconv.FormatUint(r.Ox.EventsLost, 10))
	}
	if r.Ox.Approval != nil {
		parts = append(parts, fmt.Sprintf("approval=%s decision=%s", r.Ox.Approval.ID, r.Ox.Approval.Decision))
		if r.Ox.Approval.Command != "" {
			parts = append(parts, strconv.Quote(r.Ox.Approval.Command))
		}
	}
	if r.Ox.Mode != "" && r.Ox.Kind != KindDenial {
		parts = append(parts, "mode="+r.Ox.Mode)
	}
	if r.Ox.PolicyDigest != "" {
		parts = append(parts, "policy="+truncate(r.Ox.PolicyDigest, 19))
	}
	if r.Ox.Rule != "" {
		parts = append(parts, "rule="+r.Ox.Rule)
	}
	if len(r.Ox.Ancestry) > 0 {
		names := make([]string, len(r.Ox.Ancestry))
		for i, a := range r.Ox.Ancestry {
			names[i] = a.Name
		}
		// Parent first: "under=bash<node<zsh".
		parts = append(parts, "under="+strings.Join(names, "<"))
	}
	if r.Message != "" {
		parts = append(parts, strconv.Quote(r.Message))
	}
	return strings.Join(parts, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
